#pragma once
#include <string_view>

#include "seqinbox/logger/concept.hpp"

namespace seqinbox::logger {

/// Logs nothing; `enabled` is constexpr false so messages are never built.
struct null_logger {
    static constexpr bool enabled(log_level) { return false; }
    void log(log_level, std::string_view) {}
};

}  // namespace seqinbox::logger
