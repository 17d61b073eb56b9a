#pragma once
// What text a store can keep. PostgreSQL text holds no NUL byte and only valid UTF-8, and a
// B-tree index entry is limited to about 2.7 kB, so claim keys and context ids are bounded. The
// engine rejects such deliveries up front on every backend, so both backends agree.
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace seqinbox {

/// Longest qualified type, idempotence id or context id, in bytes.
inline constexpr std::size_t max_key_bytes = 1024;

namespace detail {

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

/// At most 60 bytes of `value`, control and non-ASCII bytes as \xNN: safe in a message.
inline std::string printable(std::string_view value) {
    std::string text;
    for (std::size_t i = 0; i < value.size() && i < 60; ++i) {
        const auto c = static_cast<unsigned char>(value[i]);
        if (c >= 0x20 && c < 0x7F) {
            text += static_cast<char>(c);
        } else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            text += hex;
        }
    }
    return value.size() > 60 ? text + "..." : text;
}

}  // namespace detail

/// Why `value` cannot be stored as text (NUL byte, invalid UTF-8), or an empty string.
/// `what` names the value in the message ("idempotence id").
inline std::string text_problem(std::string_view what, std::string_view value) {
    for (std::size_t i = 0; i < value.size();) {
        const std::size_t length = value[i] == '\0' ? 0 : detail::utf8_sequence_length(value, i);
        if (length == 0)
            return std::string(what) + " '" + detail::printable(value) + "' " +
                   (value[i] == '\0' ? "contains a NUL byte" : "is not valid UTF-8") + " at byte " + std::to_string(i);
        i += length;
    }
    return {};
}

/// Like text_problem, and also longer than max_key_bytes.
inline std::string key_problem(std::string_view what, std::string_view value) {
    if (value.size() > max_key_bytes)
        return std::string(what) + " '" + detail::printable(value) + "' is " + std::to_string(value.size()) +
               " bytes long; at most " + std::to_string(max_key_bytes) + " are allowed";
    return text_problem(what, value);
}

}  // namespace seqinbox
