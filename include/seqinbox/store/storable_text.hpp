#pragma once
// What text a store can keep. PostgreSQL text holds no NUL byte and only valid UTF-8, and a
// B-tree index entry is limited to about 2.7 kB, so claim keys and context ids are bounded. The
// engine rejects such deliveries up front on every backend, so both backends agree.
#include <cstddef>
#include <string>
#include <string_view>

#include "seqinbox/detail/escaped_text.hpp"

namespace seqinbox {

/// Longest qualified type, idempotence id or context id, in bytes.
inline constexpr std::size_t max_key_bytes = 1024;
static_assert(max_key_bytes <= detail::logged_bytes, "log lines show every storable key whole");

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
