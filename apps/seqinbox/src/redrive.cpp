// The redrive subcommand: see redrive.hpp.
#include "redrive.hpp"

#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <variant>

#include "json.hpp"
#include "options.hpp"
#include "seqinbox/kafka/redrive.hpp"
#include "seqinbox/yaml/instant.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view usage =
    "usage: seqinbox redrive --bootstrap-servers HOSTS --from DLQ --to TOPIC [--kind K] [--type T] [--since T] [--dry-run]\n"
    "\n"
    "Copies dead letters back to an input topic with their original key, value and headers (the\n"
    "failure headers taken off), and records each copy in a ledger topic so that a second run does not\n"
    "copy it again. Reads the dead-letter topic from its beginning to the end it has when the run starts.\n"
    "\n"
    "  --bootstrap-servers HOSTS Kafka brokers (host:port,...)\n"
    "  --from DLQ                the dead-letter topic\n"
    "  --to TOPIC                where the copies go (a dead letter of that topic goes back to its partition)\n"
    "  --ledger TOPIC            what was copied (default DLQ.redriven; it must exist)\n"
    "  --kind K                  only dead letters of this failure kind (listener_failed, undecodable_on_replay, ...)\n"
    "  --type T                  only dead letters of this qualified type\n"
    "  --since T                 only dead letters written at or after T: an instant (2026-12-01T00:00:00Z)\n"
    "                            or a duration ago (2h)\n"
    "  --dry-run                 count what would be copied; copy and record nothing\n"
    "  --kafka-property K=V      librdkafka property of the consumer and the producer (repeatable)\n"
    "  --json                    one JSON document instead of text\n"
    "\n"
    "exit status: 0 done, 1 Kafka refused or did not answer (reason on stderr), 2 usage error\n";

struct invocation {
    kafka::redrive_options options;
    bool json = false;
};

failure_kind kind_argument(std::string_view text) {
    if (const auto kind = parse_failure_kind(text)) return *kind;
    std::string names;
    for (failure_kind k : all_failure_kinds) names += (names.empty() ? "" : ", ") + std::string(to_string(k));
    throw usage_error("seqinbox redrive: unknown failure kind '" + std::string(text) + "'; one of " + names);
}

timestamp since_argument(const option_reader& r, std::string_view text) {
    auto instant = yaml::parse_instant(text);
    if (const auto* at = std::get_if<timestamp>(&instant)) return *at;
    const bool looks_like_instant = text.find_first_of("-:T") != std::string_view::npos;
    if (!looks_like_instant)  // a duration ago: 2h, 30m
        return std::chrono::time_point_cast<timestamp::duration>(std::chrono::system_clock::now()) -
               std::chrono::duration_cast<timestamp::duration>(r.duration("--since", text));
    throw usage_error("seqinbox redrive: option '--since' expects an instant (2026-12-01T00:00:00Z) or a duration (2h), not '" +
                      std::string(text) + "': " + std::get<std::string>(instant));
}

std::optional<invocation> parse(std::span<const std::string_view> args) {
    invocation call;
    auto& o = call.options;
    for (option_reader r(args, "redrive"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage;
            return std::nullopt;
        }
        if (auto v = r.value("--bootstrap-servers")) o.client.insert_or_assign("bootstrap.servers", std::string(*v));
        else if (auto f = r.value("--from")) o.from = std::string(*f);
        else if (auto t = r.value("--to")) o.to = std::string(*t);
        else if (auto l = r.value("--ledger")) o.ledger = std::string(*l);
        else if (auto k = r.value("--kind")) o.select.kind = kind_argument(*k);
        else if (auto y = r.value("--type")) o.select.type = std::string(*y);
        else if (auto s = r.value("--since")) o.select.since = since_argument(r, *s);
        else if (auto p = r.value("--kafka-property")) assign(o.client, r.assignment("--kafka-property", *p));
        else if (r.flag("--dry-run")) o.dry_run = true;
        else if (r.flag("--json")) call.json = true;
        else r.unknown();
    }
    require_option("redrive", o.client.contains("bootstrap.servers"), "--bootstrap-servers");
    require_option("redrive", !o.from.empty(), "--from");
    require_option("redrive", !o.to.empty(), "--to");
    return call;
}

void print_text(const kafka::redrive_report& r, const kafka::redrive_options& o) {
    std::cout << (o.dry_run ? "dry run: would copy " : "copied ") << r.copied << " of " << r.selected << " selected dead letters ("
              << r.read << " read) from " << o.from << " to " << o.to << '\n';
    std::cout << "  already copied by an earlier run: " << r.already_copied << '\n';
    std::cout << "  skipped, the sink had left out their value, key or headers: " << r.omitted << '\n';
    for (const auto& [kind, n] : r.copied_by_kind) std::cout << "  " << (kind.empty() ? "(no kind)" : kind) << ": " << n << '\n';
    if (!o.dry_run) std::cout << "recorded in " << kafka::ledger_topic_of(o) << '\n';
}

void print_json(const kafka::redrive_report& r, const kafka::redrive_options& o) {
    std::cout << "{\"dry_run\": " << (o.dry_run ? "true" : "false") << ", \"from\": " << json_string(o.from) << ", \"to\": " << json_string(o.to)
              << ", \"ledger\": " << json_string(kafka::ledger_topic_of(o)) << ", \"read\": " << r.read << ", \"selected\": " << r.selected
              << ", \"copied\": " << r.copied << ", \"already_copied\": " << r.already_copied << ", \"omitted\": " << r.omitted
              << ", \"copied_by_kind\": {";
    bool first = true;
    for (const auto& [kind, n] : r.copied_by_kind) {
        std::cout << (first ? "" : ", ") << json_string(kind) << ": " << n;
        first = false;
    }
    std::cout << "}}\n";
}

}  // namespace

int redrive_command(std::span<const std::string_view> args) {
    const auto call = parse(args);
    if (!call) return exit_ok;
    const auto report = kafka::redrive(call->options);
    if (call->json) print_json(report, call->options);
    else print_text(report, call->options);
    return exit_ok;
}

}  // namespace seqinbox::cli
