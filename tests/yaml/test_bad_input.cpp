// Hostile or broken input ends in a clear problem, never a crash, a hang or a stack overflow
// (this suite also runs under AddressSanitizer in CI).
#define BOOST_TEST_MODULE yaml_bad_input
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "fixture.hpp"

using namespace yaml_test;

namespace {

constexpr std::size_t deep = 10000;

const std::string head = "sequences:\n  - name: S\n    retentionPeriod: 24h\n    messages:\n"
                         "      - type: A\n        contextIdExtractor: key\n";

/// The only problem of `text`, which must contain `fragment`.
void expect_one_problem(const std::string& text, const std::string& fragment) {
    const auto start = std::chrono::steady_clock::now();
    const auto problems = seqinbox::yaml::bind_names(seqinbox::yaml::parse_string(text, "bad.yaml"), app_registry()).messages();
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    // A guard against work that multiplies (10^9 nodes would take hours), not a speed target: the
    // sanitized tree at -O0 on a loaded CI machine took 11 s to reject the alias case.
    BOOST_TEST(elapsed.count() < 60000);
    BOOST_TEST_REQUIRE(problems.size() == 1u, problems.size() << " problems; first: " << (problems.empty() ? "" : problems[0]));
    BOOST_TEST(problems[0].find(fragment) != std::string::npos, problems[0]);
    BOOST_TEST(problems[0].starts_with("bad.yaml:"));
}

std::string repeat(const std::string& s, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += s;
    return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ten_megabytes) {
    expect_one_problem(head + "#" + std::string(10 * 1024 * 1024, 'x') + "\n", "declaration files are limited to");
}

BOOST_AUTO_TEST_CASE(ten_megabyte_file_is_not_read) {
    const auto path = std::filesystem::temp_directory_path() / "seqinbox_yaml_10mb.yaml";
    {
        std::ofstream out(path, std::ios::binary);
        out << head << std::string(10 * 1024 * 1024, ' ') << '\n';
    }
    const auto problems = problems_of(path);
    std::filesystem::remove(path);
    BOOST_TEST_REQUIRE(problems.size() == 1u);
    BOOST_TEST(problems[0].find(":1:1: the file has 10485") != std::string::npos, problems[0]);
}

BOOST_AUTO_TEST_CASE(conditions_nested_ten_thousand_deep_in_flow_style) {
    const std::string condition = repeat("{ and: [ { predecessor: A }, ", deep) + "{ predecessor: A }" + repeat(" ] }", deep);
    expect_one_problem(head + "      - type: B\n        contextIdExtractor: key\n        releaseCondition: " + condition + "\n",
                       "nesting is deeper than 64 levels");
}

BOOST_AUTO_TEST_CASE(lists_nested_ten_thousand_deep_in_block_style) {
    expect_one_problem("sequences:\n  " + repeat("- ", deep) + "x\n", "nesting is too deep for the YAML parser");
}

BOOST_AUTO_TEST_CASE(conditions_nested_deeper_than_the_limit_in_block_style) {
    // Block style needs ever more indentation; 100 levels fit easily in the size limit.
    std::string text = head + "      - type: B\n        contextIdExtractor: key\n        releaseCondition:\n";
    std::string indent(10, ' ');
    for (int i = 0; i < 100; ++i) {
        text += indent + "and:\n" + indent + "  - predecessor: A\n" + indent + "  -\n";
        indent += "    ";
    }
    text += indent + "predecessor: A\n";
    const auto problems = seqinbox::yaml::bind_names(seqinbox::yaml::parse_string(text, "bad.yaml"), app_registry()).messages();
    BOOST_TEST_REQUIRE(!problems.empty());
    BOOST_TEST(problems[0].find("release condition is nested deeper than 64 levels") != std::string::npos, problems[0]);
}

BOOST_AUTO_TEST_CASE(aliases_cannot_multiply_the_work) {
    // Each level lists the previous one ten times: 10^9 condition nodes if aliases were expanded.
    std::string text = head + "      - type: B\n        contextIdExtractor: key\n        releaseCondition:\n"
                              "          or:\n            - &l0 { predecessor: A }\n";
    for (int level = 1; level <= 9; ++level) {
        text += "            - &l" + std::to_string(level) + " { and: [";
        for (int k = 0; k < 10; ++k) text += (k ? ", " : "") + std::string("*l") + std::to_string(level - 1);
        text += "] }\n";
    }
    expect_one_problem(text, "the declarations are too large");
}

BOOST_AUTO_TEST_CASE(binary_garbage) {
    std::string garbage;
    for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919) % 256);
    expect_one_problem(garbage, "not valid UTF-8");
}

BOOST_AUTO_TEST_CASE(utf16_file) {
    expect_one_problem(std::string("\xff\xfes\0e\0", 6), "not valid UTF-8");
}

BOOST_AUTO_TEST_CASE(scalar_document) {
    expect_one_problem("just text\n", "the top level must be a map, not a scalar");
}

BOOST_AUTO_TEST_CASE(tab_indentation) {
    expect_one_problem("sequences:\n\t- name: S\n", "2:2: YAML syntax error: illegal block entry");
}

BOOST_AUTO_TEST_CASE(stray_comma_after_the_first_document) {
    // Found by the fuzz target: yaml-cpp's LoadAll loops forever on these.
    expect_one_problem(",a", "more than one YAML document");
    expect_one_problem("\"a\",", "more than one YAML document");
    expect_one_problem(std::string(",\0\0\0\0\0\0\0# nothing", 17), "more than one YAML document");
}
