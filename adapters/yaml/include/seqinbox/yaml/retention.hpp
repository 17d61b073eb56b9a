#pragma once
// Retention periods, deduplication windows and gap timeouts as written in declaration files.
#include <chrono>
#include <string>
#include <string_view>
#include <variant>

namespace seqinbox::yaml {

/// Parses `24h`, `30m`, `90s`, `7d` or an ISO-8601 duration made of weeks, days, hours, minutes
/// and seconds (`P7D`, `PT1H30M`, `P1DT12H`). Returns the positive period, or why `text` is
/// rejected (malformed, zero, negative, too large, or with years/months, which have no fixed length).
std::variant<std::chrono::seconds, std::string> parse_retention(std::string_view text);

/// The same syntax for a deduplication window, which may be zero (`0s`: CLOSED instances go at
/// the next housekeeping run) but not negative.
std::variant<std::chrono::seconds, std::string> parse_deduplication_window(std::string_view text);

/// The retention's syntax and limits for a numbered sequence's gap timeout (positive).
std::variant<std::chrono::seconds, std::string> parse_gap_timeout(std::string_view text);

}  // namespace seqinbox::yaml
