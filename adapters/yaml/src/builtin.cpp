#include <optional>
#include <string>
#include <string_view>
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

}  // namespace seqinbox::yaml
