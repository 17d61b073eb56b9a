#pragma once
// Test helper: recognises the ISO-8601 UTC time with milliseconds that log lines start with.
// Plain character checks, as GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitized build.
#include <cctype>
#include <cstddef>
#include <string_view>

namespace seqinbox::test {

/// The shape of `2026-12-01T15:40:08.123Z`: 'd' stands for a digit.
inline constexpr std::string_view iso_utc_time_shape = "dddd-dd-ddTdd:dd:dd.dddZ";

/// Whether `text` starts with such a time.
inline bool starts_with_iso_utc_time(std::string_view text) {
    if (text.size() < iso_utc_time_shape.size()) return false;
    for (std::size_t i = 0; i < iso_utc_time_shape.size(); ++i) {
        const bool digit = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
        if (iso_utc_time_shape[i] == 'd' ? !digit : text[i] != iso_utc_time_shape[i]) return false;
    }
    return true;
}

}  // namespace seqinbox::test
