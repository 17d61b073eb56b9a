// libFuzzer target: the declaration loader, the JSON pointer reader and the retention parser
// must survive any input (no crash, leak, hang, or undefined behaviour under the sanitizers).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "seqinbox/declare/problems.hpp"
#include "seqinbox/yaml/builtin.hpp"
#include "seqinbox/yaml/loader.hpp"
#include "seqinbox/yaml/retention.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    seqinbox::yaml::registry<std::string> names;
    names.add_extractor("order-id", [](const std::string& m, const seqinbox::envelope&) { return std::optional(m); });
    names.add_resolver("kind", [](const std::string& m, const seqinbox::envelope&) { return m; }, {"A", "B"});
    const auto result =
        seqinbox::yaml::bind_names(seqinbox::yaml::parse_string(text, "fuzz.yaml"), names, {.assume_registered = size % 2 == 0});
    // No problem reported means the declarations really are valid.
    if (result.problems.empty() && !seqinbox::find_problems(result.decls).empty()) __builtin_trap();
    for (const auto& p : result.problems)
        if (p.where.line == 0 || p.text.empty()) __builtin_trap();
    (void)result.messages();
    (void)seqinbox::yaml::json_pointer_value(text, "/a/0/b~1c");
    (void)seqinbox::yaml::json_pointer_value(text, "");
    (void)seqinbox::yaml::parse_retention(text.substr(0, 64));
    return 0;
}
