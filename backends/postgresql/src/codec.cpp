#include "codec.hpp"

#include <chrono>
#include <initializer_list>

#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::postgresql::detail {

std::string sql_timestamp(std::string_view param) {
    return "(TIMESTAMPTZ 'epoch' + " + std::string(param) + " * INTERVAL '1 microsecond')";
}

std::string sql_microseconds(std::string_view column) {
    return "CAST(extract(epoch FROM " + std::string(column) + ") * 1000000 AS bigint)";
}

long long to_microseconds(timestamp t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

timestamp from_microseconds(long long us) {
    return timestamp(std::chrono::duration_cast<timestamp::duration>(std::chrono::microseconds(us)));
}

std::string microseconds_text(timestamp t) { return std::to_string(to_microseconds(t)); }

std::string to_hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        hex += digits[b >> 4];
        hex += digits[b & 0x0F];
    }
    return hex;
}

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) throw error(error_category::internal, "odd-length hex text from PostgreSQL");
    std::string bytes;
    bytes.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int high = hex_digit(hex[i]), low = hex_digit(hex[i + 1]);
        if (high < 0 || low < 0) throw error(error_category::internal, "invalid hex text from PostgreSQL");
        bytes += static_cast<char>(high * 16 + low);
    }
    return bytes;
}

std::string encode_headers(const std::vector<header>& headers) {
    std::string text;
    for (const auto& h : headers) {
        if (!text.empty()) text += ',';
        text += to_hex(h.name) + '.' + to_hex(h.value);
    }
    return text;
}

std::vector<header> decode_headers(std::string_view text) {
    std::vector<header> headers;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        const auto dot = item.find('.');
        if (dot == std::string_view::npos) throw error(error_category::internal, "malformed stored headers");
        headers.push_back({from_hex(item.substr(0, dot)), from_hex(item.substr(dot + 1))});
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    }
    return headers;
}

namespace {

std::string_view to_string(stored_as s) noexcept {
    switch (s) {
    case stored_as::inserted: return "INSERTED";
    case stored_as::updated: return "UPDATED";
    case stored_as::left_existing: return "LEFT_EXISTING";
    }
    return "?";
}

/// The one of `values` whose to_string is `text`; `what` names the enum in the error.
template <class Enum>
Enum parse(std::string_view what, std::string_view text, std::initializer_list<Enum> values) {
    for (const Enum value : values)
        if (to_string(value) == text) return value;
    throw error(error_category::internal, "unknown " + std::string(what) + " '" + seqinbox::detail::printable(text) + "' read from PostgreSQL");
}

}  // namespace

message_state parse_message_state(std::string_view text) {
    return parse("message state", text, {message_state::waiting, message_state::processed, message_state::failed});
}

instance_state parse_instance_state(std::string_view text) {
    return parse("instance state", text, {instance_state::open, instance_state::closed});
}

message_action parse_message_action(std::string_view text) {
    return parse("message action", text, {message_action::consume, message_action::expire});
}

instance_action parse_instance_action(std::string_view text) {
    return parse("instance action", text, {instance_action::consume_all, instance_action::close, instance_action::skip_gap});
}

stored_as parse_stored_as(std::string_view text) {
    return parse("seqinbox_store_message outcome", text, {stored_as::inserted, stored_as::updated, stored_as::left_existing});
}

}  // namespace seqinbox::postgresql::detail
