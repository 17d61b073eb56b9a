#include "codec.hpp"

#include <charconv>
#include <chrono>
#include <stdexcept>

namespace seqinbox::mariadb::detail {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void append_length(std::string& out, std::size_t n) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
}

std::optional<std::size_t> read_length(std::string_view bytes, std::size_t& at) {
    if (bytes.size() - at < 4) return std::nullopt;
    std::size_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(bytes[at++]);
    if (bytes.size() - at < n) return std::nullopt;
    return n;
}

}  // namespace

std::string bytes_literal(std::string_view value) {
    std::string out = "X'";
    out.reserve(value.size() * 2 + 3);
    for (unsigned char c : value) {
        out += hex_digits[c >> 4];
        out += hex_digits[c & 0xf];
    }
    return out + "'";
}

std::string nullable_bytes_literal(const std::optional<std::string>& value) { return value ? bytes_literal(*value) : "NULL"; }

std::string time_literal(timestamp t) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    return "TIMESTAMPADD(MICROSECOND, " + std::to_string(us) + ", TIMESTAMP'1970-01-01 00:00:00')";
}

std::string microseconds_of(std::string_view column) {
    return "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', " + std::string(column) + ")";
}

std::string key_condition(const claim_key& key, std::string_view prefix) {
    const std::string p(prefix);
    return p + "message_type = " + bytes_literal(key.type) + " AND " + p + "idempotence_id = " + bytes_literal(key.idempotence_id);
}

timestamp from_microseconds(long long us) {
    return timestamp(std::chrono::duration_cast<timestamp::duration>(std::chrono::microseconds(us)));
}

std::string_view state_text(message_state s) { return to_string(s); }

message_state parse_message_state(std::string_view s) {
    return s == "WAITING" ? message_state::waiting : s == "PROCESSED" ? message_state::processed : message_state::failed;
}

instance_action parse_instance_action(std::string_view s) {
    for (auto a : {instance_action::consume_all, instance_action::close, instance_action::skip_gap})
        if (to_string(a) == s) return a;
    throw std::invalid_argument("a pending action of a sequence instance is '" + std::string(s) + "'");
}

std::string encode_headers(const std::vector<header>& headers) {
    std::string out;
    for (const auto& h : headers) {
        append_length(out, h.name.size());
        out += h.name;
        append_length(out, h.value.size());
        out += h.value;
    }
    return out;
}

std::vector<header> decode_headers(std::string_view bytes) {
    std::vector<header> headers;
    for (std::size_t at = 0; at < bytes.size();) {
        header h;
        const auto name = read_length(bytes, at);
        if (!name) break;  // written by encode_headers only: a short tail cannot occur
        h.name = std::string(bytes.substr(at, *name));
        at += *name;
        const auto value = read_length(bytes, at);
        if (!value) break;
        h.value = std::string(bytes.substr(at, *value));
        at += *value;
        headers.push_back(std::move(h));
    }
    return headers;
}

bool null_at(const soci::row& row, std::size_t i) { return row.get_indicator(i) == soci::i_null; }

std::string text_at(const soci::row& row, std::size_t i) {
    if (null_at(row, i)) return {};
    return row.get<std::string>(i);
}

long long number_at(const soci::row& row, std::size_t i) {
    if (null_at(row, i)) return 0;
    switch (row.get_properties(i).get_data_type()) {
    case soci::dt_integer: return row.get<int>(i);
    case soci::dt_long_long: return row.get<long long>(i);
    case soci::dt_unsigned_long_long: return static_cast<long long>(row.get<unsigned long long>(i));
    case soci::dt_double: return static_cast<long long>(row.get<double>(i));
    default: return std::stoll(row.get<std::string>(i));  // DECIMAL arrives as text
    }
}

std::string any_key(const std::vector<claim_key>& keys, std::string_view prefix) {
    std::string text;
    for (const auto& k : keys) text += std::string(text.empty() ? "" : " OR ") + "(" + key_condition(k, prefix) + ")";
    return text;
}

std::vector<std::string> joined_within(const std::vector<std::string>& items, std::string_view separator, std::size_t budget) {
    std::vector<std::string> lists;
    for (const auto& item : items) {
        if (lists.empty() || lists.back().size() + separator.size() + item.size() > budget) lists.emplace_back();
        else lists.back() += separator;
        lists.back() += item;
    }
    return lists;
}

bool null_at(const row& r, std::size_t i) { return r.null(i); }

std::string text_at(const row& r, std::size_t i) { return std::string(r.bytes(i)); }

long long number_at(const row& r, std::size_t i) {
    const auto text = r.bytes(i);
    long long value = 0;
    // A DECIMAL (a SUM) arrives as "12.000": its integer part.
    const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), value);
    if ((failure != std::errc{} && !text.empty()) || (end != text.data() + text.size() && *end != '.'))
        throw std::invalid_argument("a MariaDB column read as a number is '" + std::string(text) + "'");
    return value;
}

std::string message_columns() {
    return "m.id, m.sequence_instance_id, m.message_type, m.idempotence_id, m.state, " + microseconds_of("m.created_at") + ", " +
           microseconds_of("m.state_changed_at") + ", m.sequence_number";
}

std::string message_columns_with_record() {
    return message_columns() + ", m.record_headers IS NOT NULL, m.cluster, m.topic, m.`partition`, m.`offset`, m.record_key, " +
           "m.record_value, " + microseconds_of("m.record_time") + ", m.record_headers, m.record_key IS NULL, m.record_value IS NULL";
}

message_record message_at(const row& row, bool with_record, std::size_t first) {
    message_record m;
    std::size_t i = first;
    m.id = number_at(row, i++);
    m.instance = number_at(row, i++);
    m.type = text_at(row, i++);
    m.idempotence_id = text_at(row, i++);
    m.state = parse_message_state(text_at(row, i++));
    m.created_at = from_microseconds(number_at(row, i++));
    m.state_changed_at = from_microseconds(number_at(row, i++));
    if (!null_at(row, i)) m.number = number_at(row, i);
    ++i;
    if (!with_record || number_at(row, i++) == 0) return m;
    envelope e;
    e.cluster = text_at(row, i++);
    e.topic = text_at(row, i++);
    e.partition = static_cast<std::int32_t>(number_at(row, i++));
    e.offset = number_at(row, i++);
    const std::string key = text_at(row, i++);
    const std::string value = text_at(row, i++);
    e.time = from_microseconds(number_at(row, i++));
    e.headers = decode_headers(text_at(row, i++));
    if (number_at(row, i++) == 0) e.key = key;
    if (number_at(row, i++) == 0) e.value = value;
    m.payload = std::move(e);
    return m;
}

std::string instance_columns() {
    return "i.id, i.name, i.context_id, i.state, " + microseconds_of("i.created_at") + ", " + microseconds_of("i.retain_until") + ", " +
           microseconds_of("i.remove_after");
}

sequence_instance instance_at(const row& row, std::size_t first) {
    sequence_instance s;
    std::size_t i = first;
    s.id = number_at(row, i++);
    s.sequence = text_at(row, i++);
    s.context_id = text_at(row, i++);
    s.state = text_at(row, i++) == "CLOSED" ? instance_state::closed : instance_state::open;
    s.created_at = from_microseconds(number_at(row, i++));
    s.retain_until = from_microseconds(number_at(row, i++));
    if (!null_at(row, i)) s.remove_after = from_microseconds(number_at(row, i));
    return s;
}

}  // namespace seqinbox::mariadb::detail
