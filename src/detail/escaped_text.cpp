// One home for showing untrusted text (see seqinbox/detail/escaped_text.hpp).
#include "seqinbox/detail/escaped_text.hpp"

#include <cstdio>

namespace seqinbox::detail {

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
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

bool is_utf8(std::string_view text) {
    for (std::size_t i = 0, length = 0; i < text.size(); i += length)
        if ((length = utf8_sequence_length(text, i)) == 0) return false;
    return true;
}

std::string utf8_repaired(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = utf8_sequence_length(text, i);
        out += length == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(i, length);
        i += length == 0 ? 1 : length;
    }
    return out;
}

std::string escaped(std::string_view value, std::size_t limit) {
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

std::string printable(std::string_view value) { return escaped(value, 60); }

std::string loggable(std::string_view value) { return escaped(value, logged_bytes); }

std::string loggable_message(std::string_view type, std::string_view idempotence_id, std::string_view context_id) {
    return loggable(type) + "/" + loggable(idempotence_id) + (context_id.empty() ? "" : " context " + loggable(context_id));
}

}  // namespace seqinbox::detail
