// Every rejection of docs/declarations.md and of the YAML format: one file each under files/invalid/, the
// exact problems expected (position and text), and nothing else reported.
#define BOOST_TEST_MODULE yaml_rejections
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "fixture.hpp"

using namespace yaml_test;
namespace data = boost::unit_test::data;

namespace {

struct rejection {
    std::string file;                   ///< under files/invalid/, without .yaml
    std::vector<std::string> expected;  ///< each problem: "line:col: " and a fragment of its text

    friend std::ostream& operator<<(std::ostream& out, const rejection& r) { return out << r.file; }
};

const std::vector<rejection> rejections{
    {"missing_sequence_name", {"2:5: sequences[0] has no name"}},
    {"duplicate_sequence_name", {"7:5: sequence 'S': sequence name already used by sequences[0]"}},
    {"empty_sequence", {"2:5: sequence 'S': declares no message types"}},
    {"missing_type", {"7:9: sequence 'S': messages[1] has no type"}},
    {"missing_context_id_extractor", {"7:9: sequence 'S': type 'B': no context id extractor"}},
    {"missing_retention", {"2:5: sequence 'S': no 'retentionPeriod'"}},
    {"malformed_retention", {"3:22: sequence 'S': malformed retention period '24 hours'"}},
    {"zero_retention", {"3:22: sequence 'S': retention period '0h' must be positive, not zero"}},
    {"negative_retention", {"3:22: sequence 'S': retention period '-1h' must be positive"}},
    {"retention_in_months", {"3:22: sequence 'S': malformed ISO-8601 retention period 'P1M': years and months"}},
    {"negative_deduplication_window", {"4:26: sequence 'S': deduplication window '-1h' must not be negative (a sign is not allowed)"}},
    {"malformed_deduplication_window", {"4:26: sequence 'S': malformed deduplication window '1 week'; expected e.g. 24h"}},
    {"bad_buffer",
     {"4:17: sequence 'S': 'maxWaiting' must be a whole number from 1 to 1000000, got '0'",
      "5:21: sequence 'S': unknown overflowPolicy 'drop'; expected dead-letter-newest, dead-letter-instance or reject",
      "10:17: sequence 'T': 'maxWaiting' must be a whole number from 1 to 1000000, got '2000000'",
      "17:17: sequence 'U': 'maxWaiting' must be a whole number from 1 to 1000000, got '-3'", "18:5: sequence 'U': unknown key 'maxWaitng'"}},
    {"bad_numbering",
     {"4:18: sequence 'S': 'firstNumber' must be a whole number from 0 to 9223372036854775807 or first-seen, got '-1'",
      "5:17: sequence 'S': gap timeout '0s' must be positive, not zero",
      "6:16: sequence 'S': unknown gapPolicy 'drop'; expected hold, skip or dead-letter",
      "10:25: sequence number extractor 'header:': built-in 'header:NAME' needs a header name",
      "13:18: sequence 'T': 'firstNumber' must be a whole number from 0 to 9223372036854775807 or first-seen, got 'first seen'",
      "14:17: sequence 'T': malformed gap timeout '5 minutes'; expected e.g. 24h",
      "19:25: unknown sequence number extractor 'nope': register it in C++ as a context id extractor or use a built-in (key, "
      "header:NAME, json:/pointer)",
      "22:18: sequence 'U': 'firstNumber' must be a whole number from 0 to 9223372036854775807 or first-seen, got "
      "'9223372036854775808'",
      "23:5: sequence 'U': unknown key 'gapTimout' (did you mean 'gapTimeout'?",
      "27:25: sequence 'U': type 'C': 'sequenceNumber' must be a scalar, not a list"}},
    {"numbering_misdeclared",
     {"8:9: sequence 'Mixed': a sequence number is declared by 'A' but not by 'B'; declare one on every type of the sequence or on none",
      "11:5: sequence 'Ordered': gap policy 'dead-letter' never applies without a gap timeout; set a gap timeout or keep the policy 'hold'",
      "18:9: sequence 'Ordered': type 'D': declares a release condition (after C) and a sequence number; in a numbered sequence "
      "the numbers decide the order",
      "22:5: sequence 'Forgotten': numbering is set (first number first seen, gap timeout 3600s) but no type declares a sequence "
      "number; declare one on every type, or leave the numbering at its defaults"}},
    {"recording_until_malformed",
     {"4:21: sequence 'S': 'recordingUntil' '2026-12-01 00:00': expected an RFC 3339 instant with offset"}},
    {"recording_until_out_of_range", {"4:21: sequence 'S': 'recordingUntil' '2026-02-30T00:00:00Z': a field is out of range"}},
    {"duplicate_type_in_sequence", {"7:9: sequence 'S': type 'A': declared twice in this sequence"}},
    {"duplicate_type_across_sequences", {"10:9: sequence 'T': type 'A': already declared in sequence 'S' messages[0]"}},
    {"subtype_without_resolver", {"7:9: type 'B' is declared with subtypes 'X' but no subtype resolver is registered"}},
    {"resolver_for_type_without_subtypes", {"2:6: subtype resolver for type 'A': the type is never declared with a subtype"}},
    {"type_with_and_without_subtype", {"9:9: type 'A' is declared both without subtype"}},
    {"subtypes_on_different_topics", {"11:9: subtypes of type 'A' are declared on different topics (topic 'one': 'A.X'; topic 'two': 'A.Y')"}},
    {"resolver_returns_undeclared_subtype",
     {"2:6: subtype resolver for type 'V' can return subtype 'STOCK_MISSING', which is not declared"}},
    {"subtype_the_resolver_cannot_return",
     {"13:9: sequence 'S': type 'V.UNKNOWN': the subtype resolver of 'V' cannot return subtype 'UNKNOWN'"}},
    {"undeclared_predecessor", {"7:9: sequence 'S': type 'B': predecessor 'Missing' is not declared in this sequence"}},
    {"predecessor_and_group", {"9:27: sequence 'S': type 'B': a release condition node has both 'predecessor' and 'and'"}},
    {"and_and_or_in_one_node", {"9:27: sequence 'S': type 'B': a release condition node has both 'and' and 'or'"}},
    {"empty_node", {"9:27: sequence 'S': type 'B': empty release condition node"}},
    {"empty_group", {"7:9: sequence 'S': type 'B': release condition has an empty all_of node"}},
    {"group_with_one_element", {"7:9: sequence 'S': type 'B': release condition has an any_of with a single child"}},
    {"duplicate_predecessors", {"7:9: sequence 'S': type 'B': predecessor 'A' is listed more than once in one all_of"}},
    {"own_predecessor", {"7:9: sequence 'S': type 'B': names itself as predecessor"}},
    {"never_released", {"7:9: sequence 'S': types 'B', 'C' can never be released: cycle B -> C -> B"}},
    {"unknown_top_level_key",
     {"1:1: the top level: unknown key 'sequence' (did you mean 'sequences'?", "1:1: no 'sequences' list at the top level"}},
    {"unknown_sequence_key",
     {"2:5: sequence 'S': no 'retentionPeriod'", "3:5: sequence 'S': unknown key 'retention' (did you mean 'retentionPeriod'?"}},
    {"unknown_message_key", {"9:9: sequence 'S': type 'B': unknown key 'contextIdExtracter' (did you mean 'contextIdExtractor'?"}},
    {"unknown_condition_key",
     {"9:29: sequence 'S': type 'B': release condition: unknown key 'predecesor' (did you mean 'predecessor'?"}},
    {"duplicate_key", {"7:9: sequence 'S': type 'A': key 'type' is given twice"}},
    {"unknown_extractor", {"6:29: unknown context id extractor 'customer-id': register it in C++ or use a built-in"}},
    {"unknown_filter", {"7:24: unknown message filter 'only-vip': register it in C++"}},
    {"unknown_resolver", {"2:6: unknown subtype resolver 'kind-of-a'"}},
    {"malformed_json_pointer", {"6:29: context id extractor 'json:order/id': built-in 'json:/pointer': a JSON pointer"}},
    {"missing_context_id_unknown_value",
     {"7:27: sequence 'S': type 'A': unknown missingContextId 'dead_letter'; expected handle or dead-letter"}},
    {"missing_context_id_not_a_scalar", {"7:27: sequence 'S': type 'A': 'missingContextId' must be a scalar, not a list"}},
    {"wrong_node_kind", {"2:3: 'sequences' must be a list, not a map"}},
    {"messages_not_a_list",
     {"2:5: sequence 'S': declares no message types", "5:7: sequence 'S': 'messages' must be a list, not a map"}},
    {"condition_not_a_map", {"9:27: sequence 'S': type 'B': a release condition node must be a map, not a list"}},
    {"no_sequences", {"1:1: no 'sequences' list at the top level"}},
    {"empty_sequences", {"1:1: 'sequences' is empty"}},
    {"two_documents", {"1:1: the file holds more than one YAML document"}},
    {"syntax_error", {"4:1: YAML syntax error: end of sequence flow not found"}},
    {"empty", {"1:1: the file declares nothing"}},
    {"only_comments", {"1:1: the file declares nothing"}},
    {"not_utf8", {"2:12: the file is not valid UTF-8 (byte offset 22)"}},
};

}  // namespace

BOOST_DATA_TEST_CASE(rejected_with_position_and_name, data::make(rejections), r) {
    const auto path = invalid_file(r.file);
    const auto problems = problems_of(path);
    BOOST_TEST_REQUIRE(problems.size() == r.expected.size(), r.file << ": " << problems.size() << " problems");
    for (std::size_t i = 0; i < problems.size(); ++i) {
        const auto expected = path.string() + ":" + r.expected[i];
        BOOST_TEST(problems[i].starts_with(expected), problems[i] << "\n  does not start with\n" << expected);
    }
}

BOOST_AUTO_TEST_CASE(every_invalid_file_has_a_test) {
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(files_dir / "invalid")) {
        ++files;
        const auto name = entry.path().stem().string();
        BOOST_TEST((std::ranges::find(rejections, name, &rejection::file) != rejections.end()), name);
    }
    BOOST_TEST(files == rejections.size());
}

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once) {
    const auto problems = problems_of(files_dir / "several_problems.yaml");
    const auto file = (files_dir / "several_problems.yaml").string();
    const std::vector<std::string> expected{
        file + ":3:22: sequence 'S': malformed retention period '1 day'",
        file + ":6:29: unknown context id extractor 'nope'",
        file + ":7:9: sequence 'S': type 'B': predecessor 'Z' is not declared in this sequence",
        file + ":9:9: sequence 'S': type 'B': unknown key 'toppic' (did you mean 'topic'?",
        file + ":11:9: sequence 'S': type 'A': declared twice in this sequence",
    };
    BOOST_TEST_REQUIRE(problems.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) BOOST_TEST(problems[i].starts_with(expected[i]), problems[i]);
}

BOOST_AUTO_TEST_CASE(the_exception_carries_every_problem) {
    try {
        seqinbox::yaml::load_file(files_dir / "several_problems.yaml", app_registry());
        BOOST_FAIL("no error");
    } catch (const seqinbox::error& e) {
        BOOST_CHECK(e.category() == seqinbox::error_category::configuration);
        BOOST_TEST(e.details().size() == 5u);
        BOOST_TEST(std::string(e.what()).find("several_problems.yaml:11:9:") != std::string::npos);
    }
}
