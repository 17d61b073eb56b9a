#pragma once
#include <chrono>
#include <string_view>

#include "seqinbox/metrics/concept.hpp"

namespace seqinbox::metrics {

/// Records nothing.
struct null_metrics {
    void consumed(std::string_view) {}
    void buffered(std::string_view) {}
    void released(std::string_view, std::chrono::nanoseconds) {}
    void failed(std::string_view) {}
    void duplicate(std::string_view) {}
    void handled(std::string_view, std::chrono::nanoseconds) {}
};

}  // namespace seqinbox::metrics
