#pragma once
// Shared by the yaml tests: the application's registry and file helpers.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/yaml/loader.hpp"
#include "seqinbox/yaml/registry.hpp"

namespace yaml_test {

using message = std::string;  // the decoded payload

inline const std::filesystem::path files_dir{SEQINBOX_YAML_FILES};

inline std::filesystem::path valid_file(const std::string& name) { return files_dir / "valid" / (name + ".yaml"); }
inline std::filesystem::path invalid_file(const std::string& name) { return files_dir / "invalid" / (name + ".yaml"); }

/// What an application registers: `order-id` reads the payload, `only-sequenced` skips
/// payloads starting with "skip", `validation-kind` returns the payload's first word.
inline seqinbox::yaml::registry<message> app_registry() {
    seqinbox::yaml::registry<message> r;
    r.add_extractor("order-id", [](const message& m, const seqinbox::envelope&) -> std::optional<std::string> {
        if (m.empty()) return std::nullopt;
        return "order-" + m;
    });
    r.add_filter("only-sequenced", [](const message& m, const seqinbox::envelope&) { return !m.starts_with("skip"); });
    r.add_resolver("validation-kind", [](const message& m, const seqinbox::envelope&) { return m.substr(0, m.find(' ')); },
                   {"STOCK_AVAILABLE", "STOCK_MISSING"});
    return r;
}

/// Every problem of a file, as `file:line:col: text`.
inline std::vector<std::string> problems_of(const std::filesystem::path& path,
                                            const seqinbox::yaml::load_options& options = {}) {
    return seqinbox::yaml::bind_names(seqinbox::yaml::parse_file(path), app_registry(), options).messages();
}

inline seqinbox::envelope with_header(std::string name, std::string value) {
    seqinbox::envelope e;
    e.headers.push_back({std::move(name), std::move(value)});
    return e;
}

}  // namespace yaml_test
