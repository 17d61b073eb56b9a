#pragma once
// The logger policy. The engine builds a message only when `enabled(level)` is true. Messages
// are one line: text from a record in them is escaped (seqinbox/detail/escaped_text.hpp).
#include <concepts>
#include <string_view>

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
concept logger = requires(L& l, log_level level, std::string_view message) {
    { l.enabled(level) } -> std::convertible_to<bool>;
    { l.log(level, message) } -> std::same_as<void>;
};

}  // namespace seqinbox
