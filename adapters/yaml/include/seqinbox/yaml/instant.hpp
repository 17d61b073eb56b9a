#pragma once
// Instants as written in declaration files (recordingUntil).
#include <string>
#include <string_view>
#include <variant>

#include "seqinbox/envelope.hpp"

namespace seqinbox::yaml {

/// Parses an RFC 3339 date-time with an explicit offset: `2026-12-01T00:00:00Z`,
/// `2026-12-01T01:00:00.250+01:00`. Returns the instant, or why `text` is rejected (malformed,
/// no offset, a year outside 1970..2200, or a field out of range such as month 13 or February 30).
std::variant<timestamp, std::string> parse_instant(std::string_view text);

}  // namespace seqinbox::yaml
