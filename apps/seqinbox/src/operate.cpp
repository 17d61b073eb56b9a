// The operator subcommands: see operate.hpp.
#include "operate.hpp"

#include <charconv>
#include <chrono>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "database_flag.hpp"
#include "json.hpp"
#include "open_store.hpp"
#include "options.hpp"
#include "pooler_flag.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view connection_help =
    "  --postgres CONNINFO  the inbox database: a libpq connection string, or (the same flag as\n"
    "  --database URL       --postgres) mariadb://user:password@host:port/database for MariaDB\n"
    "  --pooler MODE        transaction: through PgBouncer in transaction pooling mode; none: directly (default)\n"
    "  --json               one JSON document instead of a table\n";

constexpr std::string_view exit_help =
    "\n"
    "exit status: 0 done, 1 not found, refused or unreachable (reason on stderr), 2 usage error\n";

/// What every operator subcommand reads from its command line.
struct invocation {
    std::optional<std::string> conninfo;
    postgresql::pooler pooler = postgresql::pooler::none;
    bool json = false;
    std::vector<std::string> positional;
};

/// Parses the common options; `extra(reader)` may take subcommand options and returns whether it did.
std::optional<invocation> parse(std::span<const std::string_view> args, std::string_view command, std::string_view usage,
                                std::size_t positional, const std::function<bool(option_reader&)>& extra = {},
                                bool positional_optional = false) {
    invocation call;
    for (option_reader r(args, command); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage;
            return std::nullopt;
        }
        std::string database;
        if (read_database_flag(r, database)) call.conninfo = std::move(database);
        else if (read_pooler_flag(r, call.pooler)) continue;
        else if (r.flag("--json")) call.json = true;
        else if (extra && extra(r)) continue;
        else if (!r.current().starts_with('-') && call.positional.size() < positional) call.positional.emplace_back(r.current());
        else r.unknown();
    }
    const std::string name(command);
    require_option(command, call.conninfo.has_value(), "--postgres");
    if (!positional_optional && call.positional.size() < positional) throw usage_error("seqinbox " + name + ": missing argument; see seqinbox " + name + " --help");
    return call;
}

/// Runs `body` on a store of one connection; seqinbox errors become exit 1 with the reason.
template <class Body>
int with_store(std::string_view command, const invocation& call, Body&& body) {
    try {
        return on_store(*call.conninfo, call.pooler, 2, body);
    } catch (const seqinbox::error& e) {
        std::cerr << "seqinbox " << command << ": " << to_string(e.category()) << ": " << e.what() << '\n';
        return exit_check_failed;
    }
}

std::int64_t id_argument(std::string_view command, const std::string& text) {
    std::int64_t id = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc{} || end != text.data() + text.size() || id <= 0)
        throw usage_error("seqinbox " + std::string(command) + ": expected a positive id, not '" + text + "'");
    return id;
}

std::string instance_json(const sequence_instance& i) {
    return "{\"id\": " + std::to_string(i.id) + ", \"sequence\": " + json_string(i.sequence) + ", \"context_id\": " +
           json_string(i.context_id) + ", \"state\": \"" + std::string(to_string(i.state)) + "\", \"created_at\": \"" +
           utc_time(i.created_at) + "\", \"retain_until\": \"" + utc_time(i.retain_until) + "\", \"remove_after\": " +
           (i.remove_after ? "\"" + utc_time(*i.remove_after) + "\"" : std::string("null")) + "}";
}

std::string instance_line(const sequence_instance& i) {
    return std::to_string(i.id) + "  " + i.sequence + "  " + i.context_id + "  " + std::string(to_string(i.state)) + "  created " +
           utc_time(i.created_at) + "  retain until " + utc_time(i.retain_until) +
           (i.remove_after ? "  remove after " + utc_time(*i.remove_after) : std::string());
}

void print_instances(const std::vector<sequence_instance>& rows, bool json) {
    if (json) {
        std::cout << "{\"instances\": [";
        for (std::size_t i = 0; i < rows.size(); ++i) std::cout << (i ? ", " : "") << instance_json(rows[i]);
        std::cout << "]}\n";
        return;
    }
    for (const auto& row : rows) std::cout << instance_line(row) << '\n';
    std::cout << rows.size() << (rows.size() == 1 ? " instance\n" : " instances\n");
}

/// Prints what a request found; the exit status.
int report_request(std::string_view command, request_outcome outcome, const std::string& target) {
    if (!accepted(outcome)) {
        std::cerr << "seqinbox " << command << ": " << refusal_text(outcome, target) << '\n';
        return exit_check_failed;
    }
    std::cout << "requested " << command << " on " << target << "; the pending-action job executes it\n";
    return exit_ok;
}

std::string request_usage(std::string_view command, std::string_view target, std::string_view by_key, std::string_view about = {}) {
    return "usage: seqinbox " + std::string(command) + " " + std::string(target) + " --postgres CONNINFO\n\n" + std::string(about) +
           "Writes a pending action; the service's pending-action job executes it\n"
           "under the instance lock, then runs a release pass and closes the instance when complete.\n\n" +
           std::string(connection_help.substr(0, connection_help.find("  --json"))) + std::string(by_key) + std::string(exit_help);
}

}  // namespace

int status_command(std::span<const std::string_view> args) {
    const std::string usage = "usage: seqinbox status --postgres CONNINFO [--json]\n\nInstances per sequence and state, messages per type and state.\n\n" +
                              std::string(connection_help) + std::string(exit_help);
    const auto call = parse(args, "status", usage, 0);
    if (!call) return exit_ok;
    return with_store("status", *call, [&](auto& store) {
        const auto instances = store.instance_counts();
        const auto messages = store.message_counts();
        if (call->json) {
            std::cout << "{\"instances\": [";
            for (std::size_t i = 0; i < instances.size(); ++i)
                std::cout << (i ? ", " : "") << "{\"sequence\": " << json_string(instances[i].sequence) << ", \"state\": \""
                          << to_string(instances[i].state) << "\", \"count\": " << instances[i].count << "}";
            std::cout << "], \"messages\": [";
            for (std::size_t i = 0; i < messages.size(); ++i)
                std::cout << (i ? ", " : "") << "{\"type\": " << json_string(messages[i].type) << ", \"state\": \""
                          << to_string(messages[i].state) << "\", \"count\": " << messages[i].count << "}";
            std::cout << "]}\n";
            return int(exit_ok);
        }
        std::cout << "instances\n";
        for (const auto& c : instances) std::cout << "  " << c.sequence << "  " << to_string(c.state) << "  " << c.count << '\n';
        std::cout << "messages\n";
        for (const auto& c : messages) std::cout << "  " << c.type << "  " << to_string(c.state) << "  " << c.count << '\n';
        return int(exit_ok);
    });
}

int sequences_command(std::span<const std::string_view> args) {
    const std::string usage =
        "usage: seqinbox sequences --postgres CONNINFO (--expired | --expiring [--share S]) [--limit N] [--json]\n\n"
        "OPEN instances past their retention (--expired), or past a share of it (--expiring, default 0.75).\n\n" +
        std::string(connection_help) + "  --limit N            at most N instances (default 100)\n" + std::string(exit_help);
    std::optional<bool> expired;
    double share = 0.75;
    std::uint64_t limit = 100;
    const auto call = parse(args, "sequences", usage, 0, [&](option_reader& r) {
        if (r.flag("--expired") || r.flag("--expiring")) expired = r.flag("--expired");
        else if (auto v = r.value("--limit")) limit = r.number("--limit", *v, 1, 1'000'000);
        else if (auto s = r.value("--share")) share = r.share("--share", *s);
        else return false;
        return true;
    });
    if (!call) return exit_ok;
    if (!expired) throw usage_error("seqinbox sequences: give --expired or --expiring");
    return with_store("sequences", *call, [&](auto& store) {
        const auto now = std::chrono::system_clock::now();
        print_instances(*expired ? store.expired_instances(now, limit) : store.expiring_instances(now, share, limit), call->json);
        return int(exit_ok);
    });
}

namespace {

/// An instance holding numbers is of a numbered sequence: show reads no declarations.
bool numbered(const instance_view& view) { return view.numbering.last_released || !view.numbering.waiting.empty(); }

/// The missing ranges; from the first waiting number when none was released (the declared first
/// number is not known here).
std::string numbering_json(const instance_view& view) {
    if (!numbered(view)) return "null";
    const auto& progress = view.numbering;
    std::string text = "{\"last_released\": " + (progress.last_released ? std::to_string(*progress.last_released) : std::string("null")) +
                       ", \"waiting\": [";
    for (std::size_t i = 0; i < progress.waiting.size(); ++i) text += (i ? ", " : "") + std::to_string(progress.waiting[i]);
    text += "], \"missing\": [";
    const auto gaps = missing_numbers(progress);
    for (std::size_t i = 0; i < gaps.size(); ++i)
        text += (i ? ", [" : "[") + std::to_string(gaps[i].first) + ", " + std::to_string(gaps[i].second) + "]";
    return text + "]}";
}

/// "  numbers: last released 4; waiting 6 7 9; missing 5, 8"
std::string numbering_line(const instance_view& view) {
    const auto& progress = view.numbering;
    std::string line = "  numbers: ";
    line += progress.last_released ? "last released " + std::to_string(*progress.last_released) : std::string("none released");
    line += "; waiting";
    for (const auto n : progress.waiting) line += " " + std::to_string(n);
    if (progress.waiting.empty()) line += " none";
    line += "; missing";
    const auto gaps = missing_numbers(progress);
    for (std::size_t i = 0; i < gaps.size(); ++i)
        line += (i ? ", " : " ") + std::to_string(gaps[i].first) + (gaps[i].first == gaps[i].second ? "" : "-" + std::to_string(gaps[i].second));
    if (gaps.empty()) line += " none";
    if (!progress.last_released && !progress.waiting.empty())
        line += " (and any before " + std::to_string(progress.waiting.front()) + ": show does not know the declared first number)";
    return line;
}

/// `show --json`: the API's document (docs/operator-api.md) without ages.
void print_view_json(const instance_view& view, const std::function<std::string(message_id)>& action_of) {
    std::cout << "{\"instance\": " << instance_json(view.instance) << ", \"pending_action\": "
              << (view.actions.on_instance ? json_string(to_string(view.actions.on_instance->action)) : std::string("null"))
              << ", \"message_counts\": {\"WAITING\": " << view.counts.waiting << ", \"PROCESSED\": " << view.counts.processed
              << ", \"FAILED\": " << view.counts.failed << "}, \"messages\": [";
    for (std::size_t i = 0; i < view.messages.size(); ++i) {
        const auto& m = view.messages[i];
        const auto action = action_of(m.id);
        std::cout << (i ? ", " : "") << "{\"id\": " << m.id << ", \"type\": " << json_string(m.type)
                  << ", \"idempotence_id\": " << json_string(m.idempotence_id) << ", \"state\": \"" << to_string(m.state)
                  << "\", \"state_changed_at\": \"" << utc_time(m.state_changed_at)
                  << "\", \"pending_action\": " << (action.empty() ? "null" : json_string(action)) << "}";
    }
    std::cout << "], \"next\": " << (view.next ? "\"" + std::to_string(*view.next) + "\"" : std::string("null"))
              << ", \"numbering\": " << numbering_json(view) << "}\n";
}

void print_view_table(const instance_view& view, const std::function<std::string(message_id)>& action_of) {
    std::cout << instance_line(view.instance)
              << (view.actions.on_instance ? "  pending " + std::string(to_string(view.actions.on_instance->action)) : std::string()) << '\n';
    if (numbered(view)) std::cout << numbering_line(view) << '\n';
    for (const auto& m : view.messages) {
        const auto action = action_of(m.id);
        std::cout << "  " << m.id << "  " << m.type << "  " << m.idempotence_id << "  " << to_string(m.state) << "  "
                  << utc_time(m.state_changed_at) << (action.empty() ? "" : "  pending " + action) << '\n';
    }
    std::cout << view.messages.size() << " of " << view.counts.total() << " messages (WAITING " << view.counts.waiting << ", PROCESSED "
              << view.counts.processed << ", FAILED " << view.counts.failed << ")";
    if (view.next) std::cout << "; more follow: the same command with --after " << *view.next;
    std::cout << '\n';
}

}  // namespace

int show_command(std::span<const std::string_view> args) {
    const std::string usage =
        "usage: seqinbox show --postgres CONNINFO SEQUENCE CONTEXT_ID [--limit N] [--after ID] [--json]\n\n"
        "One instance with a page of its messages (by id) and their pending actions, and its messages per state.\n\n" +
        std::string(connection_help) + "  --limit N            at most N messages (default " + std::to_string(default_message_page) +
        ", at most " + std::to_string(max_message_page) + ")\n" +
        "  --after ID           the messages after message ID: the next page (JSON: \"next\")\n" + std::string(exit_help);
    message_page page;
    const auto call = parse(args, "show", usage, 2, [&](option_reader& r) {
        if (auto v = r.value("--limit")) page.limit = r.number("--limit", *v, 1, max_message_page);
        else if (auto a = r.value("--after")) page.after = static_cast<message_id>(r.number("--after", *a, 0, std::numeric_limits<message_id>::max()));
        else return false;
        return true;
    });
    if (!call) return exit_ok;
    return with_store("show", *call, [&](auto& store) {
        const auto view = store.view_instance(call->positional[0], call->positional[1], page);
        if (!view) {
            std::cerr << "seqinbox show: no instance of sequence '" << call->positional[0] << "' for context id '" << call->positional[1] << "'\n";
            return int(exit_check_failed);
        }
        auto action_of = [&](message_id id) -> std::string {
            for (const auto& request : view->actions.on_messages)
                if (request.message == id) return std::string(to_string(request.action));
            return {};
        };
        if (call->json) print_view_json(*view, action_of);
        else print_view_table(*view, action_of);
        return int(exit_ok);
    });
}

namespace {

/// CONSUME or EXPIRE of one message, named by id or by key (qualified type and idempotence id).
int message_request(std::span<const std::string_view> args, std::string_view command, message_action action) {
    const std::string usage = request_usage(command, "(MESSAGE_ID | --type TYPE --idempotence-id ID)",
                                            "  --type TYPE          the message's qualified type (with --idempotence-id: by key)\n"
                                            "  --idempotence-id ID  the message's idempotence id\n");
    std::optional<std::string> type, idempotence_id;
    const auto call = parse(args, command, usage, 1, [&](option_reader& r) {
        if (auto v = r.value("--type")) type = std::string(*v);
        else if (auto i = r.value("--idempotence-id")) idempotence_id = std::string(*i);
        else return false;
        return true;
    }, true);
    if (!call) return exit_ok;
    const bool by_key = type || idempotence_id;
    const std::string name(command);
    if (by_key && !(type && idempotence_id)) throw usage_error("seqinbox " + name + ": give both --type and --idempotence-id");
    if (by_key == !call->positional.empty()) throw usage_error("seqinbox " + name + ": give a MESSAGE_ID or --type and --idempotence-id, not both");
    const auto id = by_key ? 0 : id_argument(command, call->positional[0]);
    return with_store(command, *call, [&](auto& store) {
        const auto now = std::chrono::system_clock::now();
        if (by_key)
            return report_request(command, request_message_action(store, claim_key{*type, *idempotence_id}, action, now),
                                  "message " + *type + "/" + *idempotence_id);
        return report_request(command, store.request_message_action(id, action, now), "message " + std::to_string(id));
    });
}

int instance_request(std::span<const std::string_view> args, std::string_view command, instance_action action, std::string_view about = {}) {
    const auto call = parse(args, command, request_usage(command, "INSTANCE_ID", "", about), 1);
    if (!call) return exit_ok;
    const auto id = id_argument(command, call->positional[0]);
    return with_store(command, *call, [&](auto& store) {
        return report_request(command, store.request_instance_action(id, action, std::chrono::system_clock::now()),
                              "instance " + std::to_string(id));
    });
}

}  // namespace

int consume_command(std::span<const std::string_view> args) { return message_request(args, "consume", message_action::consume); }
int expire_command(std::span<const std::string_view> args) { return message_request(args, "expire", message_action::expire); }
int consume_all_command(std::span<const std::string_view> args) {
    return instance_request(args, "consume-all", instance_action::consume_all);
}
int close_command(std::span<const std::string_view> args) { return instance_request(args, "close", instance_action::close); }
int skip_gap_command(std::span<const std::string_view> args) {
    return instance_request(args, "skip-gap", instance_action::skip_gap,
                            "An instance of a numbered sequence: gives up the numbers missing before its first WAITING\n"
                            "message (`seqinbox show` lists them) and releases what follows in number order.\n");
}

}  // namespace seqinbox::cli
