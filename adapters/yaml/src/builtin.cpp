#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "seqinbox/yaml/builtin.hpp"

namespace seqinbox::yaml {

builtin_lookup find_builtin(std::string_view name) {
    using status = builtin_lookup::status;
    if (name == "key") return {status::ok, [](const envelope& e) { return e.key; }, {}};
    if (name.starts_with("header:")) {
        std::string header(name.substr(7));
        if (header.empty()) return {status::malformed, {}, "built-in 'header:NAME' needs a header name"};
        return {status::ok,
                [header = std::move(header)](const envelope& e) -> std::optional<std::string> {
                    if (auto value = e.find_header(header)) return std::string(*value);
                    return std::nullopt;
                },
                {}};
    }
    if (name.starts_with("json:")) {
        std::string pointer(name.substr(5));
        if (auto problem = json_pointer_problem(pointer); !problem.empty())
            return {status::malformed, {}, "built-in 'json:/pointer': " + problem};
        return {status::ok,
                [pointer = std::move(pointer)](const envelope& e) {
                    return e.value ? json_pointer_value(*e.value, pointer) : std::nullopt;
                },
                {}};
    }
    return {};
}

std::optional<std::int64_t> parse_sequence_number(std::string_view text) {
    // from_chars would take a leading '-'; a number starts with a digit.
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
    std::int64_t n = 0;
    const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (failure != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return n;
}

}  // namespace seqinbox::yaml
