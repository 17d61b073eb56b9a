#pragma once
// One home for showing untrusted text (from a record, a database row or an exception) inside
// our own messages and log lines: escaped to printable ASCII, so it can neither break a line nor
// carry terminal control sequences or invalid UTF-8, and bounded in length.
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace seqinbox::detail {

/// Length of the valid UTF-8 sequence starting at s[i], 0 when it is invalid (overlong forms,
/// surrogates and code points above U+10FFFF included).
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char lead = byte(i);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // bounds of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) length = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else return 0;
    if (i + length > s.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
    for (std::size_t k = 2; k < length; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return length;
}

/// Whether `text` is valid UTF-8.
inline bool is_utf8(std::string_view text) {
    for (std::size_t i = 0, length = 0; i < text.size(); i += length)
        if ((length = utf8_sequence_length(text, i)) == 0) return false;
    return true;
}

/// `text` with each byte that is not part of valid UTF-8 replaced by U+FFFD.
inline std::string utf8_repaired(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = utf8_sequence_length(text, i);
        out += length == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(i, length);
        i += length == 0 ? 1 : length;
    }
    return out;
}

/// At most `limit` bytes of `value` (then "..."), control and non-ASCII bytes as \xNN. Its
/// output is printable ASCII and escapes to itself, so text escaped twice reads the same.
inline std::string escaped(std::string_view value, std::size_t limit = std::string_view::npos) {
    std::string text;
    for (std::size_t i = 0; i < value.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(value[i]);
        if (c >= 0x20 && c < 0x7F) {
            text += static_cast<char>(c);
        } else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            text += hex;
        }
    }
    return value.size() > limit ? text + "..." : text;
}

/// A value quoted in an error message about it: its first 60 bytes, escaped.
inline std::string printable(std::string_view value) { return escaped(value, 60); }

/// Bytes of a record's field that a log line shows: every storable key (seqinbox::max_key_bytes)
/// whole, any other text bounded.
inline constexpr std::size_t logged_bytes = 1024;

/// A record's field (type, id, context id) or a reason quoting one, as a log line shows it.
inline std::string loggable(std::string_view value) { return escaped(value, logged_bytes); }

/// A message as log lines name it: `type/idempotence-id`, then ` context ID` when it has one.
inline std::string loggable_message(std::string_view type, std::string_view idempotence_id, std::string_view context_id = {}) {
    return loggable(type) + "/" + loggable(idempotence_id) + (context_id.empty() ? "" : " context " + loggable(context_id));
}

}  // namespace seqinbox::detail
