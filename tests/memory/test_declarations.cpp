#define BOOST_TEST_MODULE declarations
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/declare/max_retention.hpp"
#include "seqinbox/declare/problems.hpp"

namespace {

namespace si = seqinbox;
using namespace std::chrono_literals;
using si::after;
using si::all_of;
using si::any_of;

using message = std::string;
using decls_t = si::declarations<message>;
using message_decl = si::message_declaration<message>;
using sequence_decl = si::sequence_declaration<message>;
constexpr auto npos = si::declaration_problem::npos;

/// A message declaration from a qualified type (`Type` or `Type.SUBTYPE`) with a trivial extractor.
message_decl msg(std::string_view qualified, si::condition release = {}) {
    message_decl m;
    const auto dot = qualified.find('.');
    m.type = std::string(qualified.substr(0, dot));
    if (dot != std::string_view::npos) m.subtype = std::string(qualified.substr(dot + 1));
    m.context_id = [](const message& body, const si::envelope&) { return std::optional<std::string>(body); };
    m.release = std::move(release);
    return m;
}

/// `m` with a sequence number (its payload's length): a type of a numbered sequence.
message_decl numbered(message_decl m) {
    m.sequence_number = [](const message& body, const si::envelope&) { return std::optional<std::int64_t>(body.size()); };
    return m;
}

message_decl on(message_decl m, std::string topic, std::string cluster = {}) {
    m.topic = std::move(topic);
    m.cluster = std::move(cluster);
    return m;
}

sequence_decl seq(std::string name, std::vector<message_decl> messages) {
    return {std::move(name), 24h, std::move(messages)};
}

si::subtype_resolver<message> resolver(std::vector<std::string> subtypes) {
    return {[](const message& body, const si::envelope&) { return body; }, std::move(subtypes)};
}

decls_t one(sequence_decl s) {
    decls_t d;
    d.sequences.push_back(std::move(s));
    return d;
}

std::string dump(const std::vector<si::declaration_problem>& problems) {
    std::string text = std::to_string(problems.size()) + " problem(s)";
    for (const auto& p : problems)
        text += "\n  [" + std::to_string(p.sequence) + "," + std::to_string(p.message_index) + "] " + p.message;
    return text;
}

bool contains(std::string_view text, std::string_view fragment) { return text.find(fragment) != std::string_view::npos; }

/// The details of the error `validate` throws; fails the test when it accepts `d`.
std::vector<std::string> rejection_details(const decls_t& d) {
    try {
        si::validate(d);
    } catch (const si::error& e) {
        BOOST_TEST((e.category() == si::error_category::configuration));
        BOOST_TEST(contains(e.what(), "invalid sequence declarations"));
        return e.details();
    }
    BOOST_FAIL("validate accepted invalid declarations");
    return {};
}

/// `d` has exactly the problems whose messages contain `fragments` (one list per problem, in
/// order) at the given locations, and `validate` throws them as details.
struct expected_problem {
    std::vector<std::string> fragments;
    std::size_t sequence = npos;
    std::size_t message_index = npos;
};

void expect_problems(const decls_t& d, const std::vector<expected_problem>& expected) {
    const auto problems = si::find_problems(d);
    BOOST_TEST_CONTEXT(dump(problems)) {
        BOOST_TEST_REQUIRE(problems.size() == expected.size());
        std::vector<std::string> messages;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            for (const auto& f : expected[i].fragments)
                BOOST_TEST(contains(problems[i].message, f), "problem " << i << " lacks '" << f << "'");
            BOOST_TEST(problems[i].sequence == expected[i].sequence);
            BOOST_TEST(problems[i].message_index == expected[i].message_index);
            messages.push_back(problems[i].message);
        }
        BOOST_TEST(rejection_details(d) == messages, boost::test_tools::per_element());
    }
}

void expect_problem(const decls_t& d, std::vector<std::string> fragments, std::size_t sequence,
                    std::size_t message_index = npos) {
    expect_problems(d, {{std::move(fragments), sequence, message_index}});
}

void expect_valid(const decls_t& d) {
    const auto problems = si::find_problems(d);
    BOOST_TEST(problems.empty(), dump(problems));
    BOOST_CHECK_NO_THROW(si::validate(d));
}

}  // namespace

// ---- accepted ----

BOOST_AUTO_TEST_CASE(accepts_two_sequences_with_subtypes_across_them) {
    decls_t d;
    d.sequences.push_back(seq("OrderSequence", {msg("OrderCreated"), msg("OrderValidated.STOCK_AVAILABLE", after("OrderCreated"))}));
    d.sequences.push_back(seq("RefundSequence", {msg("OrderValidated.REFUND"), msg("RefundPaid", after("OrderValidated.REFUND"))}));
    d.resolvers.emplace("OrderValidated", resolver({"STOCK_AVAILABLE", "REFUND"}));
    expect_valid(d);
}

BOOST_AUTO_TEST_CASE(accepts_nested_all_of_and_any_of) {
    expect_valid(one(seq("OrderSequence", {
        msg("OrderCreated"),
        msg("OrderValidated", after("OrderCreated")),
        msg("OrderPrepared", after("OrderValidated")),
        msg("OrderExpedited", after("OrderValidated")),
        msg("OrderShipped", all_of({after("OrderValidated"),
                                    any_of({after("OrderPrepared"),
                                            all_of({after("OrderExpedited"), after("OrderCreated")})})})),
    })));
}

BOOST_AUTO_TEST_CASE(accepts_any_of_with_a_harmless_cycle) {
    expect_valid(one(seq("S", {msg("A"), msg("B", any_of({after("A"), after("C")})), msg("C", after("B"))})));
}

BOOST_AUTO_TEST_CASE(accepts_topics_and_clusters) {
    decls_t d = one(seq("S", {
        on(msg("A"), "orders", "main"),
        on(msg("B.X", after("A")), "payments", "backup"),
        on(msg("B.Y", after("A")), "payments", "backup"),
        on(msg("C", after("B.X")), "", "backup"),
    }));
    d.resolvers.emplace("B", resolver({"X", "Y"}));
    expect_valid(d);
}

// ---- rejected: sequences and messages ----

BOOST_AUTO_TEST_CASE(rejects_missing_sequence_name) {
    expect_problem(one(seq("", {msg("A")})), {"sequences[0] has no name"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_duplicate_sequence_name) {
    decls_t d;
    d.sequences.push_back(seq("S", {msg("A")}));
    d.sequences.push_back(seq("S", {msg("B")}));
    expect_problem(d, {"sequence 'S'", "already used by sequences[0]"}, 1);
}

BOOST_AUTO_TEST_CASE(rejects_empty_sequence) {
    expect_problem(one(seq("Empty", {})), {"sequence 'Empty': declares no message types"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_missing_type) {
    expect_problem(one(seq("S", {msg("A"), msg("")})), {"sequence 'S': messages[1] has no type"}, 0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_missing_context_id_extractor) {
    auto m = msg("A");
    m.context_id = nullptr;
    expect_problem(one(seq("S", {m})), {"sequence 'S': type 'A': no context id extractor"}, 0, 0);
}

BOOST_AUTO_TEST_CASE(rejects_zero_or_negative_retention) {
    auto s = seq("S", {msg("A")});
    s.retention = 0s;
    expect_problem(one(s), {"sequence 'S': retention period must be positive, got 0s"}, 0);
    s.retention = -5s;
    expect_problem(one(s), {"sequence 'S': retention period must be positive, got -5s"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_a_negative_deduplication_window_and_accepts_zero) {
    auto s = seq("S", {msg("A")});
    s.deduplication_window = -5s;
    expect_problem(one(s), {"sequence 'S': deduplication window must not be negative, got -5s"}, 0);
    s.deduplication_window = 0s;
    expect_valid(one(s));
}

// Instance times are system_clock time points: a retention of centuries would overflow them
// (undefined behaviour) where YAML already refused more than ten years.
BOOST_AUTO_TEST_CASE(rejects_a_retention_or_window_longer_than_ten_years) {
    auto s = seq("S", {msg("A")});
    s.retention = si::max_retention;
    expect_valid(one(s));
    s.retention = std::chrono::hours(24 * 365 * 1000);
    expect_problem(one(s), {"sequence 'S': retention period is longer than ten years (the most), got 31536000000s"}, 0);
    s.retention = 1h;
    s.deduplication_window = std::chrono::seconds::max();
    expect_problem(one(s), {"sequence 'S': deduplication window is longer than ten years (the most), got " +
                            std::to_string(std::chrono::seconds::max().count()) + "s"},
                   0);
}

BOOST_AUTO_TEST_CASE(rejects_a_buffer_limit_of_zero_or_beyond_the_most) {
    auto s = seq("S", {msg("A")});
    s.buffer.max_waiting = 1;
    expect_valid(one(s));
    s.buffer.max_waiting = si::most_max_waiting;
    expect_valid(one(s));
    s.buffer.max_waiting = 0;
    expect_problem(one(s), {"sequence 'S': maxWaiting must be between 1 and 1000000, got 0"}, 0);
    s.buffer.max_waiting = si::most_max_waiting + 1;
    expect_problem(one(s), {"sequence 'S': maxWaiting must be between 1 and 1000000, got 1000001"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_type_declared_twice_in_one_sequence) {
    expect_problem(one(seq("S", {msg("A"), msg("B"), msg("A")})),
                   {"sequence 'S': type 'A': declared twice in this sequence (messages[0] and messages[2])"}, 0, 2);
}

BOOST_AUTO_TEST_CASE(rejects_type_declared_in_two_sequences) {
    decls_t d;
    d.sequences.push_back(seq("S1", {msg("A"), msg("B")}));
    d.sequences.push_back(seq("S2", {msg("B")}));
    expect_problem(d, {"sequence 'S2': type 'B': already declared in sequence 'S1' messages[1]"}, 1, 0);
}

// ---- numbered sequences ----

BOOST_AUTO_TEST_CASE(accepts_numbered_sequences_with_their_settings) {
    auto s = seq("S", {numbered(msg("A")), numbered(msg("B"))});
    BOOST_TEST(s.numbered());
    expect_valid(one(s));
    s.numbering = {std::nullopt, 60s, si::gap_policy::skip};
    expect_valid(one(s));
    s.numbering = {0, si::max_retention, si::gap_policy::dead_letter};
    expect_valid(one(s));
    s.numbering = {7, std::nullopt, si::gap_policy::hold};
    expect_valid(one(s));
}

BOOST_AUTO_TEST_CASE(rejects_a_sequence_whose_types_mix_with_and_without_a_number) {
    expect_problem(one(seq("S", {numbered(msg("A")), msg("B"), numbered(msg("C"))})),
                   {"sequence 'S': a sequence number is declared by 'A', 'C' but not by 'B'; "
                    "declare one on every type of the sequence or on none"},
                   0, 1);
    // The first type decides whether the sequence is numbered: the first that differs is located.
    expect_problem(one(seq("S", {msg("A"), msg("B"), numbered(msg("C"))})),
                   {"sequence 'S': a sequence number is declared by 'C' but not by 'A', 'B'"}, 0, 2);
}

BOOST_AUTO_TEST_CASE(rejects_a_release_condition_on_a_type_of_a_numbered_sequence) {
    expect_problem(one(seq("S", {numbered(msg("A")), numbered(msg("B", after("A")))})),
                   {"sequence 'S': type 'B': declares a release condition (after A) and a sequence number; "
                    "in a numbered sequence the numbers decide the order"},
                   0, 1);
}

// Numbered instances never close by completion: another sequence cannot wait for their types
// (predecessors belong to the waiting type's own sequence, which refuses it already).
BOOST_AUTO_TEST_CASE(rejects_a_predecessor_that_is_a_type_of_a_numbered_sequence) {
    decls_t d;
    d.sequences.push_back(seq("N", {numbered(msg("A"))}));
    d.sequences.push_back(seq("S", {msg("B", after("A"))}));
    expect_problem(d, {"sequence 'S': type 'B': predecessor 'A' is not declared in this sequence (it belongs to sequence 'N'"}, 1, 0);
    expect_problem(one(seq("S", {numbered(msg("A")), msg("B", after("A"))})),
                   {"sequence 'S': a sequence number is declared by 'A' but not by 'B'"}, 0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_a_negative_first_number) {
    auto s = seq("S", {numbered(msg("A"))});
    s.numbering.first_number = -1;
    expect_problem(one(s), {"sequence 'S': first number must not be negative, got -1"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_a_gap_timeout_that_is_not_positive_or_longer_than_ten_years) {
    auto s = seq("S", {numbered(msg("A"))});
    s.numbering.gap_timeout = 0s;
    expect_problem(one(s), {"sequence 'S': gap timeout must be positive, got 0s"}, 0);
    s.numbering.gap_timeout = -30s;
    expect_problem(one(s), {"sequence 'S': gap timeout must be positive, got -30s"}, 0);
    s.numbering.gap_timeout = si::max_retention + 1s;
    expect_problem(one(s), {"sequence 'S': gap timeout is longer than ten years (the most), got " +
                            std::to_string(si::max_retention.count() + 1) + "s"},
                   0);
}

BOOST_AUTO_TEST_CASE(rejects_a_gap_policy_without_a_gap_timeout) {
    auto s = seq("S", {numbered(msg("A"))});
    s.numbering.on_gap = si::gap_policy::skip;
    expect_problem(one(s), {"sequence 'S': gap policy 'skip' never applies without a gap timeout; "
                            "set a gap timeout or keep the policy 'hold'"},
                   0);
    s.numbering.on_gap = si::gap_policy::dead_letter;
    expect_problem(one(s), {"sequence 'S': gap policy 'dead-letter' never applies without a gap timeout"}, 0);
}

BOOST_AUTO_TEST_CASE(rejects_numbering_settings_on_a_sequence_without_numbers) {
    auto s = seq("S", {msg("A"), msg("B", after("A"))});
    s.numbering.first_number = 5;
    expect_problem(one(s), {"sequence 'S': numbering is set (first number 5) but no type declares a sequence number; "
                            "declare one on every type, or leave the numbering at its defaults"},
                   0);
    s.numbering = {std::nullopt, 90s, si::gap_policy::skip};
    expect_problem(one(s), {"sequence 'S': numbering is set (first number first seen, gap timeout 90s, gap policy 'skip')"}, 0);
    s.numbering = {};
    expect_valid(one(s));
}

// ---- rejected: subtypes, resolvers, topics ----

BOOST_AUTO_TEST_CASE(rejects_subtype_without_resolver) {
    expect_problem(one(seq("S", {msg("A.X"), msg("A.Y")})),
                   {"type 'A' is declared with subtypes 'X', 'Y' but no subtype resolver is registered for 'A'"}, 0, 0);
}

BOOST_AUTO_TEST_CASE(rejects_resolver_for_type_without_subtypes) {
    decls_t d = one(seq("S", {msg("A")}));
    d.resolvers.emplace("A", resolver({"X"}));
    expect_problem(d, {"subtype resolver for type 'A': the type is never declared with a subtype"}, npos);
    d.resolvers.clear();
    d.resolvers.emplace("Ghost", resolver({"X"}));
    expect_problem(d, {"subtype resolver for type 'Ghost': the type is not declared in any sequence"}, npos);
}

BOOST_AUTO_TEST_CASE(rejects_resolver_without_resolve_function) {
    decls_t d = one(seq("S", {msg("A.X")}));
    d.resolvers.emplace("A", resolver({"X"}));
    d.resolvers["A"].resolve = nullptr;
    expect_problem(d, {"subtype resolver for type 'A' has no resolve function"}, npos);
}

BOOST_AUTO_TEST_CASE(rejects_type_with_and_without_subtype) {
    decls_t d;
    d.sequences.push_back(seq("S1", {msg("A")}));
    d.sequences.push_back(seq("S2", {msg("A.X")}));
    d.resolvers.emplace("A", resolver({"X"}));
    expect_problem(d, {"type 'A' is declared both without subtype (sequence 'S1' messages[0])",
                       "with subtype 'X' (sequence 'S2' messages[0])"},
                   1, 0);
}

BOOST_AUTO_TEST_CASE(rejects_subtypes_on_different_topics) {
    decls_t d = one(seq("S", {on(msg("A.X"), "orders"), on(msg("A.Y"), "orders", "backup"), on(msg("A.Z"), "orders")}));
    d.resolvers.emplace("A", resolver({"X", "Y", "Z"}));
    expect_problem(d, {"subtypes of type 'A' are declared on different topics",
                       "topic 'orders': 'A.X', 'A.Z'", "topic 'orders' of cluster 'backup': 'A.Y'"},
                   0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_resolver_listing_an_undeclared_subtype) {
    decls_t d = one(seq("S", {msg("A.X")}));
    d.resolvers.emplace("A", resolver({"X", "W"}));
    expect_problem(d, {"subtype resolver for type 'A' can return subtype 'W', which is not declared (declared: 'X')"}, npos);
}

BOOST_AUTO_TEST_CASE(rejects_declared_subtype_the_resolver_cannot_return) {
    decls_t d = one(seq("S", {msg("A.X"), msg("A.Y")}));
    d.resolvers.emplace("A", resolver({"X"}));
    expect_problem(d, {"sequence 'S': type 'A.Y': the subtype resolver of 'A' cannot return subtype 'Y' (it lists 'X')"}, 0, 1);
}

// ---- rejected: release conditions ----

BOOST_AUTO_TEST_CASE(rejects_undeclared_predecessor) {
    expect_problem(one(seq("OrderSequence", {msg("OrderCreated"), msg("OrderShipped", after("OrderPacked"))})),
                   {"sequence 'OrderSequence': type 'OrderShipped': predecessor 'OrderPacked' is not declared in this sequence"},
                   0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_predecessor_from_another_sequence) {
    decls_t d;
    d.sequences.push_back(seq("S1", {msg("A")}));
    d.sequences.push_back(seq("S2", {msg("B", after("A"))}));
    expect_problem(d, {"sequence 'S2': type 'B': predecessor 'A' is not declared in this sequence",
                       "it belongs to sequence 'S1'"},
                   1, 0);
}

BOOST_AUTO_TEST_CASE(rejects_unqualified_predecessor_of_a_subtyped_type) {
    decls_t d = one(seq("S", {msg("A.X"), msg("A.Y"), msg("B", after("A"))}));
    d.resolvers.emplace("A", resolver({"X", "Y"}));
    expect_problem(d, {"predecessor 'A' is not declared in this sequence", "did you mean one of 'A.X', 'A.Y'?"}, 0, 2);
}

BOOST_AUTO_TEST_CASE(rejects_empty_node) {
    expect_problem(one(seq("S", {msg("A"), msg("B", all_of({}))})),
                   {"sequence 'S': type 'B': release condition has an empty all_of node"}, 0, 1);
    // An empty any_of can never hold; that blocks B but is reported once, as the empty node.
    expect_problem(one(seq("S", {msg("A"), msg("B", all_of({after("A"), any_of({})}))})),
                   {"sequence 'S': type 'B': release condition has an empty any_of node"}, 0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_node_with_one_child) {
    expect_problem(one(seq("S", {msg("A"), msg("B", any_of({after("A")}))})),
                   {"sequence 'S': type 'B': release condition has an any_of with a single child (after A)"}, 0, 1);
}

BOOST_AUTO_TEST_CASE(rejects_duplicate_predecessors_in_one_node) {
    expect_problem(one(seq("S", {msg("A"), msg("B"), msg("C", all_of({after("A"), after("B"), after("A"), after("A")}))})),
                   {"sequence 'S': type 'C': predecessor 'A' is listed more than once in one all_of"}, 0, 2);
    // The same predecessor in two different nodes is fine.
    expect_valid(one(seq("S", {msg("A"), msg("B"), msg("C", any_of({after("A"), all_of({after("A"), after("B")})}))})));
}

BOOST_AUTO_TEST_CASE(rejects_type_that_is_its_own_predecessor) {
    expect_problem(one(seq("S", {msg("A"), msg("B", any_of({after("A"), all_of({after("A"), after("B")})}))})),
                   {"sequence 'S': type 'B': names itself as predecessor"}, 0, 1);
    // Reported once for B; C, blocked by B, is reported on its own.
    expect_problems(one(seq("S", {msg("B", after("B")), msg("C", after("B"))})),
                    {{{"sequence 'S': type 'B': names itself as predecessor"}, 0, 0},
                     {{"sequence 'S': type 'C' can never be released: blocked by 'B', which names itself as predecessor"}, 0, 1}});
}

BOOST_AUTO_TEST_CASE(rejects_types_that_can_never_be_released) {
    expect_problem(one(seq("S", {msg("A"), msg("B", after("C")), msg("C", after("B"))})),
                   {"sequence 'S': types 'B', 'C' can never be released: cycle B -> C -> B"}, 0, 1);
    // Types blocked by a cycle are listed with it; the cycle goes through and/or nodes.
    expect_problem(one(seq("S", {
                       msg("A"),
                       msg("D", after("B")),
                       msg("B", all_of({after("A"), after("C")})),
                       msg("C", any_of({after("E"), all_of({after("A"), after("B")})})),
                       msg("E", after("C")),
                   })),
                   {"sequence 'S': types 'D', 'B', 'C', 'E' can never be released: cycle C -> E -> C"}, 0, 1);
}

BOOST_AUTO_TEST_CASE(reports_each_cycle_once) {
    expect_problems(one(seq("S", {msg("A", after("B")), msg("B", after("A")), msg("C", after("D")), msg("D", after("C")),
                                  msg("E", all_of({after("A"), after("C")}))})),
                    {{{"types 'A', 'B', 'E' can never be released: cycle A -> B -> A"}, 0, 0},
                     {{"types 'C', 'D' can never be released: cycle C -> D -> C"}, 0, 2}});
}

BOOST_AUTO_TEST_CASE(reports_types_blocked_by_an_undeclared_predecessor) {
    expect_problems(one(seq("S", {msg("A", after("X")), msg("B", after("A"))})),
                    {{{"type 'A': predecessor 'X' is not declared in this sequence"}, 0, 0},
                     {{"type 'B' can never be released: blocked by 'A', which waits for 'X', which is not declared"}, 0, 1}});
}

// ---- several problems at once ----

BOOST_AUTO_TEST_CASE(reports_every_problem) {
    decls_t d;
    auto broken = seq("", {msg("A"), msg("A"), msg("B.X", after("Z"))});
    broken.retention = 0s;
    broken.messages[0].context_id = nullptr;
    d.sequences.push_back(broken);
    d.sequences.push_back(seq("T", {msg("C", any_of({after("C")}))}));
    d.resolvers.emplace("Ghost", resolver({}));
    expect_problems(d, {
        {{"sequences[0] has no name"}, 0, npos},
        {{"sequences[0] (unnamed): retention period must be positive"}, 0, npos},
        {{"sequences[0] (unnamed): type 'A': no context id extractor"}, 0, 0},
        {{"type 'B.X': predecessor 'Z' is not declared in this sequence"}, 0, 2},
        {{"sequence 'T': type 'C': release condition has an any_of with a single child (after C)"}, 1, 0},
        {{"sequence 'T': type 'C': names itself as predecessor"}, 1, 0},
        {{"type 'A': declared twice in this sequence (messages[0] and messages[1])"}, 0, 1},
        {{"type 'B' is declared with subtypes 'X' but no subtype resolver is registered for 'B'"}, 0, 2},
        {{"subtype resolver for type 'Ghost': the type is not declared in any sequence"}, npos, npos},
    });
    // The error carries them all, one detail each.
    const auto details = rejection_details(d);
    BOOST_TEST(details.size() == 9u);
}

// ---- the release fixpoint and the condition renderer, shared by validation, `seqinbox validate` and the demo ----

BOOST_AUTO_TEST_CASE(release_order_lists_types_round_by_round_in_declaration_order) {
    // Round 1: A and C (no predecessor); round 2: D (after C) and B (after A), by declaration.
    const auto s = seq("S", {msg("D", after("C")), msg("B", after("A")), msg("A"), msg("C"),
                             msg("E", all_of({after("B"), any_of({after("D"), after("Z")})}))});
    BOOST_TEST(si::release_order(s) == (std::vector<std::size_t>{2, 3, 0, 1, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(release_order_leaves_out_what_never_releases_and_repeated_types) {
    // B and C wait for each other; the second A is a repeat; the message without a type is skipped.
    const auto s = seq("S", {msg("A"), msg("B", after("C")), msg("C", after("B")), msg("A"), msg("", after("A")),
                             msg("D", any_of({}))});
    BOOST_TEST(si::release_order(s) == (std::vector<std::size_t>{0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_later_copy_of_a_type_does_not_hide_what_blocks_its_first_declaration) {
    // The first A waits for B, B for A: a cycle. The repeated A without a condition must not make
    // A releasable (only a type's first declaration counts), so the cycle is still reported.
    const auto s = seq("S", {msg("A", after("B")), msg("B", after("A")), msg("A")});
    BOOST_TEST(si::release_order(s).empty());
    const auto details = rejection_details(one(s));
    BOOST_TEST(std::ranges::any_of(details, [](const std::string& d) { return d.find("cycle") != std::string::npos; }),
               "no cycle reported among " << details.size() << " problems");
}

BOOST_AUTO_TEST_CASE(describe_writes_a_condition_in_calls_or_in_words) {
    const auto c = all_of({after("A"), any_of({after("B"), after("C")})});
    BOOST_TEST(si::describe(c) == "all_of(after A, any_of(after B, after C))");
    BOOST_TEST(si::describe(c, si::condition_notation::words) == "A and (B or C)");
    BOOST_TEST(si::describe(si::condition{}) == "always");
    BOOST_TEST(si::describe(si::condition{}, si::condition_notation::words) == "nothing");
    BOOST_TEST(si::describe(after("A"), si::condition_notation::words) == "A");
    BOOST_TEST(si::describe(any_of({})) == "any_of()");
}
