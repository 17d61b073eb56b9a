#pragma once
// Times as people and log tools read them: RFC 3339 / ISO-8601 UTC with milliseconds.
#include <chrono>
#include <string>

namespace seqinbox::logger {

/// `t` as 2026-11-30T12:00:00.000Z (milliseconds truncated, not rounded).
std::string utc_time(std::chrono::system_clock::time_point t);

}  // namespace seqinbox::logger
