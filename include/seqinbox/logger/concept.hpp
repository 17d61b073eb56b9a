#pragma once
// The logger policy. The engine builds a message only when `enabled(level)` is true. Messages
// are one line: text from a record in them is escaped (seqinbox/detail/escaped_text.hpp).
// A logger may also take the engine's decisions as events (decision_logger); one that does not
// gets each decision as a line of text (seqinbox/logger/decision_text.hpp).
#include <concepts>
#include <string_view>

#include "seqinbox/decision.hpp"

namespace seqinbox {

enum class log_level { trace, debug, info, warn, error };

constexpr std::string_view to_string(log_level l) noexcept {
    switch (l) {
    case log_level::trace: return "trace";
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
    }
    return "?";
}

template <class L>
concept logger_policy = requires(L& l, log_level level, std::string_view message) {
    { l.enabled(level) } -> std::convertible_to<bool>;
    { l.log(level, message) } -> std::same_as<void>;
};

/// A logger that takes every decision as an event, whatever its level, instead of as a line of
/// text; it still gets the engine's other messages (retries, anomalies) through `log`.
template <class L>
concept decision_logger = logger_policy<L> && requires(L& l, const decision& event) {
    { l.decided(event) } -> std::same_as<void>;
};

}  // namespace seqinbox
