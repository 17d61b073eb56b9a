#include "seqinbox/relay/detail/operator_json.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <set>

#include "seqinbox/detail/share_text.hpp"
#include "seqinbox/logger/utc_time.hpp"

namespace seqinbox::relay::detail {

namespace {

constexpr std::size_t default_limit = 50;
constexpr std::size_t max_limit = 1000;

[[noreturn]] void bad_request(const std::string& reason) { throw api_refusal(400, reason); }

json time_json(timestamp t) { return logger::utc_time(t); }

double seconds_since(timestamp t, timestamp now) {
    return std::chrono::duration<double>(now - t).count();
}

json optional_time(const std::optional<timestamp>& t) { return t ? time_json(*t) : json(nullptr); }

template <class T>
std::optional<T> whole_number(std::string_view text) {
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::string cursor_of(const sequence_instance& row) {
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(row.retain_until.time_since_epoch()).count();
    return std::to_string(micros) + "." + std::to_string(row.id);
}

/// A client's value in an error text: scalars as they are, containers by their type only
/// (dumping is recursive: a deeply nested body must not exhaust the stack).
std::string shown(const json& value) {
    if (value.is_structured()) return std::string("a JSON ") + value.type_name();
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Text a client gave, refused when it holds NUL or is not UTF-8 (the store could not take it as is).
std::string checked_text(std::string text, const std::string& name) {
    bool utf8 = true;
    try {
        (void)json(text).dump();
    } catch (const json::type_error&) {
        utf8 = false;
    }
    if (!utf8 || text.find('\0') != std::string::npos) bad_request("'" + name + "' must be UTF-8 text without NUL characters");
    return text;
}

json parsed_body(std::string_view body) {
    json document = json::parse(body, nullptr, false);
    if (document.is_discarded()) bad_request("the body is not JSON: '" + std::string(body.substr(0, 200)) + "'");
    if (!document.is_object()) bad_request("the body must be a JSON object, not " + shown(document));
    return document;
}

std::string string_field(const json& body, const std::string& name) {
    const auto& value = body.at(name);
    if (!value.is_string() || value.get_ref<const std::string&>().empty())
        bad_request("'" + name + "' must be a non-empty string, not " + shown(value));
    return checked_text(value.get<std::string>(), name);
}

/// The target of an action body: "id", or both of `names`; no other field besides "action".
std::variant<std::int64_t, std::pair<std::string, std::string>> target_of(const json& body, const std::string& first,
                                                                          const std::string& second) {
    const std::set<std::string> known{"action", "id", first, second};
    for (const auto& [name, value] : body.items())
        if (!known.contains(name)) bad_request("unknown field '" + name + "'; an action takes action and id, or action, " + first + " and " + second);
    const bool by_id = body.contains("id");
    const bool by_names = body.contains(first) || body.contains(second);
    if (by_id == by_names) bad_request("give either 'id' or '" + first + "' and '" + second + "'");
    if (by_id) {
        const auto& id = body.at("id");
        if (!id.is_number_integer() || id.get<std::int64_t>() <= 0) bad_request("'id' must be a positive integer, not " + shown(id));
        return id.get<std::int64_t>();
    }
    if (!body.contains(first) || !body.contains(second)) bad_request("give both '" + first + "' and '" + second + "'");
    return std::pair{string_field(body, first), string_field(body, second)};
}

template <class Action>
Action action_of(const json& body, std::initializer_list<Action> actions) {
    if (!body.contains("action")) bad_request("the field 'action' is missing");
    const auto& value = body.at("action");
    std::string names;
    for (const auto a : actions) {
        if (value.is_string() && value.get_ref<const std::string&>() == to_string(a)) return a;
        names += (names.empty() ? "" : " or ") + std::string(to_string(a));
    }
    bad_request("'action' must be " + names + ", not " + shown(value));
}

}  // namespace

http_response json_response(int status, const json& body) {
    return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", {{"Cache-Control", "no-store"}}};
}

http_response error_response(int status, std::string_view reason) { return json_response(status, json{{"error", reason}}); }

json instance_json(const sequence_instance& i, timestamp now) {
    return {{"id", i.id},
            {"sequence", i.sequence},
            {"context_id", i.context_id},
            {"state", to_string(i.state)},
            {"created_at", time_json(i.created_at)},
            {"retain_until", time_json(i.retain_until)},
            {"remove_after", optional_time(i.remove_after)},
            {"age_seconds", seconds_since(i.created_at, now)}};
}

json message_json(const message_record& m, const std::optional<message_request>& pending, timestamp now) {
    return {{"id", m.id},
            {"type", m.type},
            {"idempotence_id", m.idempotence_id},
            {"state", to_string(m.state)},
            {"created_at", time_json(m.created_at)},
            {"state_changed_at", time_json(m.state_changed_at)},
            {"age_seconds", seconds_since(m.created_at, now)},
            {"pending_action", pending ? json(to_string(pending->action)) : json(nullptr)}};
}

json numbering_json(const instance_view& v, const declared_numbering& declared) {
    const auto& progress = v.numbering;
    std::optional<std::int64_t> first_number;
    if (declared) {
        const auto rules = declared(v.instance.sequence);
        if (!rules) return nullptr;
        first_number = rules->first_number;
    } else if (!progress.last_released && progress.waiting.empty()) {
        return nullptr;
    }
    json missing = json::array();
    for (const auto& [from, to] : missing_numbers(progress, first_number)) missing.push_back({from, to});
    return {{"last_released", progress.last_released ? json(*progress.last_released) : json(nullptr)},
            {"waiting", progress.waiting},
            {"missing", std::move(missing)}};
}

json instance_view_json(const instance_view& v, timestamp now, const declared_numbering& declared) {
    json messages = json::array();
    for (const auto& m : v.messages) {
        std::optional<message_request> pending;
        for (const auto& request : v.actions.on_messages)
            if (request.message == m.id) pending = request;
        messages.push_back(message_json(m, pending, now));
    }
    const auto& on_instance = v.actions.on_instance;
    json counts = json::object();
    for (const auto state : {message_state::waiting, message_state::processed, message_state::failed})
        counts[std::string(to_string(state))] = v.counts[state];
    return {{"instance", instance_json(v.instance, now)},
            {"pending_action", on_instance ? json(to_string(on_instance->action)) : json(nullptr)},
            {"message_counts", std::move(counts)},
            {"messages", std::move(messages)},
            {"next", v.next ? json(std::to_string(*v.next)) : json(nullptr)},
            {"numbering", numbering_json(v, declared)}};
}

json message_view_json(const message_view& v, timestamp now) {
    return {{"message", message_json(v.message, v.pending, now)}, {"instance", instance_json(v.instance, now)}};
}

json waiting_json(const std::vector<waiting_instance>& rows, timestamp now) {
    json instances = json::array();
    for (const auto& w : rows) {
        auto row = instance_json(w.instance, now);
        row["oldest_waiting_since"] = time_json(w.oldest_waiting_since);
        row["waiting_age_seconds"] = seconds_since(w.oldest_waiting_since, now);
        row["waiting"] = w.waiting;
        instances.push_back(std::move(row));
    }
    return {{"instances", std::move(instances)}};
}

json counts_json(const std::vector<instance_count>& instances, const std::vector<message_count>& messages) {
    json by_instance = json::array();
    for (const auto& c : instances) by_instance.push_back({{"sequence", c.sequence}, {"state", to_string(c.state)}, {"count", c.count}});
    json by_message = json::array();
    for (const auto& c : messages) by_message.push_back({{"type", c.type}, {"state", to_string(c.state)}, {"count", c.count}});
    return {{"instances", std::move(by_instance)}, {"messages", std::move(by_message)}};
}

json page_json(const std::vector<sequence_instance>& rows, std::size_t limit, timestamp now) {
    json instances = json::array();
    for (const auto& row : rows) instances.push_back(instance_json(row, now));
    const bool full = !rows.empty() && rows.size() >= limit;
    return {{"instances", std::move(instances)}, {"next", full ? json(cursor_of(rows.back())) : json(nullptr)}};
}

std::size_t limit_parameter(const http_request& r) { return limit_parameter(r, default_limit, max_limit); }

std::size_t limit_parameter(const http_request& r, std::size_t otherwise, std::size_t most) {
    const auto text = r.parameter("limit");
    if (!text) return otherwise;
    const auto limit = whole_number<std::size_t>(*text);
    if (!limit || *limit < 1 || *limit > most)
        bad_request("'limit' must be a whole number from 1 to " + std::to_string(most) + ", not '" + *text + "'");
    return *limit;
}

message_page message_page_parameters(const http_request& r) {
    message_page page{.limit = limit_parameter(r, default_message_page, max_message_page)};
    if (const auto text = r.parameter("after")) {
        const auto after = whole_number<message_id>(*text);
        if (!after || *after < 0) bad_request("'after' must be the 'next' of the page before, not '" + *text + "'");
        page.after = *after;
    }
    return page;
}

scan_position after_parameter(const http_request& r) {
    const auto text = r.parameter("after");
    if (!text) return {};
    const auto dot = text->find('.');
    const auto micros = whole_number<std::int64_t>(std::string_view(*text).substr(0, dot));
    const auto id = dot == std::string::npos ? std::nullopt : whole_number<std::int64_t>(std::string_view(*text).substr(dot + 1));
    constexpr auto max_micros = std::chrono::duration_cast<std::chrono::microseconds>(timestamp::duration::max()).count();
    if (!micros || !id || *micros < -max_micros || *micros > max_micros)
        bad_request("'after' must be the 'next' of the page before, not '" + *text + "'");
    return {timestamp(std::chrono::microseconds(*micros)), *id};
}

double share_parameter(const http_request& r, double otherwise) {
    const auto text = r.parameter("share");
    if (!text) return otherwise;
    const auto share = seqinbox::detail::plain_share(*text);
    if (!share) bad_request("'share' must be a decimal number in (0, 1], not '" + *text + "'");
    return *share;
}

std::int64_t id_segment(std::string_view segment, std::string_view what) {
    const auto id = whole_number<std::int64_t>(segment);
    if (!id || *id <= 0) throw api_refusal(404, "no " + std::string(what) + " '" + std::string(segment) + "': ids are positive integers");
    return *id;
}

std::vector<std::string> required_parameters(const http_request& r, std::initializer_list<std::string_view> names) {
    std::vector<std::string> values;
    for (const auto name : names) {
        auto value = r.parameter(name);
        if (!value || value->empty()) bad_request("the query parameter '" + std::string(name) + "' is missing");
        values.push_back(checked_text(std::move(*value), std::string(name)));
    }
    return values;
}

action_request<message_action> message_action_body(std::string_view body) {
    const auto document = parsed_body(body);
    return {action_of(document, {message_action::consume, message_action::expire}), target_of(document, "type", "idempotence_id")};
}

action_request<instance_action> instance_action_body(std::string_view body) {
    const auto document = parsed_body(body);
    return {action_of(document, {instance_action::consume_all, instance_action::close, instance_action::skip_gap}), target_of(document, "sequence", "context_id")};
}

}  // namespace seqinbox::relay::detail
