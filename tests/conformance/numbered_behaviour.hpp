#pragma once
// The conformance suite's cases of numbered sequences (README, "Numbered sequences"): release in
// strictly increasing number order without gaps, duplicates of a number skipped, the first number,
// failures, batches and concurrency, as every store must carry them. Include it after
// conformance/buffer_behaviour.hpp.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conformance/buffer_behaviour.hpp"

namespace seqinbox::conformance {

inline declarations<message> ledger() { return example::ledger_declarations<message>(); }

/// A ledger record of `context` numbered `number` (header `seq`; "" leaves it out).
inline envelope numbered(const std::string& type, const std::string& id, const std::string& context, const std::string& number) {
    envelope e = testing::record(type, id, context);
    if (!number.empty()) e.headers.push_back({"seq", number});
    return e;
}

inline envelope entry(const std::string& id, const std::string& context, std::int64_t number) {
    return numbered("LedgerEntry", id, context, std::to_string(number));
}

/// The ledger declarations with another first number (empty: the first number seen).
inline declarations<message> ledger_from(std::optional<std::int64_t> first) {
    auto decls = ledger();
    decls.sequences.front().numbering.first_number = first;
    return decls;
}

/// The ledger declarations with a gap timeout of a minute and `policy`.
inline declarations<message> ledger_with_gap(gap_policy policy) {
    auto decls = ledger();
    decls.sequences.front().numbering.gap_timeout = std::chrono::minutes(1);
    decls.sequences.front().numbering.on_gap = policy;
    return decls;
}

/// The error-sink records of kind gap_timeout, as "Type/id".
template <class B>
strings gap_timeouts_in_sink(B& b) {
    strings keys;
    for (const auto& f : b.error_sink.records())
        if (f.kind == failure_kind::gap_timeout) keys.push_back(f.qualified_type + "/" + f.idempotence_id);
    std::ranges::sort(keys);
    return keys;
}

/// Scripts for the batch differential: gaps filled late, duplicates of numbers, failures.
inline std::vector<delivery_script> numbered_scripts() {
    delivery_script gaps{"numbered, gaps filled late", {}, {}, ledger()};
    gaps.records = {entry("e3", "a", 3), entry("e2", "a", 2), entry("x2", "a", 2), entry("e1", "b", 1), entry("e1", "a", 1),
                    entry("e5", "a", 5), numbered("LedgerCorrection", "c4", "a", "4"), entry("e2", "b", 2), entry("e3", "a", 3),
                    entry("e0", "a", 0), entry("e6", "a", 6)};
    delivery_script failing = gaps;
    failing.name = "numbered, a released listener fails";
    failing.failing = {"LedgerEntry/e2", "LedgerEntry/e5"};
    return {gaps, failing};
}

}  // namespace seqinbox::conformance

BOOST_AUTO_TEST_SUITE(numbered_sequences)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_calls;
using conf::expect_outcome;
using conf::expect_rows;
using si::outcome;

BOOST_AUTO_TEST_CASE_TEMPLATE(numbers_are_released_in_order_whatever_order_they_arrive_in, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    expect_outcome(h.deliver(conf::entry("e3", "a", 3)), outcome::buffered);
    expect_outcome(h.deliver(conf::numbered("LedgerCorrection", "c2", "a", "2")), outcome::buffered);
    expect_outcome(h.deliver(conf::entry("e5", "a", 5)), outcome::buffered);
    const auto first = h.deliver(conf::entry("e1", "a", 1));
    expect_outcome(first, outcome::processed);
    BOOST_TEST(first.released == 2u, "2 and 3; 5 waits for 4");
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerCorrection/c2 (replayed)", "LedgerEntry/e3 (replayed)"});
    expect_rows(b, "LedgerEntry", "e5", {"WAITING"});
    const auto fourth = h.deliver(conf::entry("e4", "a", 4));
    BOOST_TEST(fourth.released == 1u);
    expect_rows(b, "LedgerEntry", "e5", {"PROCESSED"});
    BOOST_TEST(b.messages_with_key({"LedgerEntry", "e5"}).front().number.value_or(-1) == 5);
    const auto instance = b.find_instance("LedgerSequence", "a");
    BOOST_TEST_REQUIRE(instance.has_value());
    BOOST_TEST((instance->state == si::instance_state::open), "a numbered instance has no last number: it never closes by completion");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(contexts_are_numbered_independently, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    expect_outcome(h.deliver(conf::entry("a2", "a", 2)), outcome::buffered);
    expect_outcome(h.deliver(conf::entry("b1", "b", 1)), outcome::processed);
    expect_outcome(h.deliver(conf::entry("b2", "b", 2)), outcome::processed);
    expect_rows(b, "LedgerEntry", "a2", {"WAITING"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_second_message_with_a_number_is_skipped_as_a_duplicate, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    h.deliver(conf::entry("e1", "a", 1));
    expect_outcome(h.deliver(conf::entry("e1", "a", 1)), outcome::duplicate);  // the same key: its claim
    expect_outcome(h.deliver(conf::entry("other1", "a", 1)), outcome::duplicate);  // another key, a released number
    expect_outcome(h.deliver(conf::entry("e3", "a", 3)), outcome::buffered);
    expect_outcome(h.deliver(conf::numbered("LedgerCorrection", "c3", "a", "3")), outcome::duplicate);  // a WAITING number
    expect_outcome(h.deliver(conf::entry("e0", "a", 0)), outcome::duplicate);  // below the first number
    BOOST_TEST(b.messages_with_key({"LedgerEntry", "other1"}).empty(), "a duplicate stores no row");
    BOOST_TEST(b.messages_with_key({"LedgerCorrection", "c3"}).empty());
    BOOST_TEST(b.has_claim({"LedgerEntry", "other1"}), "its claim stays: its own redeliveries are skipped at once");
    h.deliver(conf::entry("e2", "a", 2));
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerEntry/e2", "LedgerEntry/e3 (replayed)"});
    BOOST_TEST(b.error_sink.records().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_message_without_a_valid_number_is_a_bad_message, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    for (const char* number : {"", "x7", "-3", "7 ", "99999999999999999999", "9223372036854775807"}) {
        const auto result = h.deliver(conf::numbered("LedgerEntry", std::string("bad") + number, "a", number));
        BOOST_TEST_CONTEXT("number '" << number << "'") {
            expect_outcome(result, outcome::rejected);
        }
    }
    BOOST_TEST_REQUIRE(b.error_sink.records().size() == 6u);
    const auto largest = b.error_sink.records().back().reason;
    BOOST_TEST(largest.find("the largest 64-bit number") != std::string::npos, largest);
    const auto first = b.error_sink.records().front();
    BOOST_TEST(first.reason.find("no sequence number") != std::string::npos, first.reason);
    BOOST_TEST(first.reason.find("LedgerEntry") != std::string::npos, first.reason);
    BOOST_TEST(b.messages().empty());
    BOOST_TEST(h.log.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_context_may_start_at_the_first_number_it_sees, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_from(std::nullopt));
    expect_outcome(h.deliver(conf::entry("e5", "a", 5)), outcome::processed);
    expect_outcome(h.deliver(conf::entry("e7", "a", 7)), outcome::buffered);
    BOOST_TEST(h.deliver(conf::entry("e6", "a", 6)).released == 1u);
    expect_outcome(h.deliver(conf::entry("e4", "a", 4)), outcome::duplicate);
    expect_outcome(h.deliver(conf::entry("b9", "b", 9)), outcome::processed);
    expect_calls(h.log, {"LedgerEntry/e5", "LedgerEntry/e6", "LedgerEntry/e7 (replayed)", "LedgerEntry/b9"});
}

// The largest number has no successor: once released, the expected number would overflow.
BOOST_AUTO_TEST_CASE_TEMPLATE(numbers_up_to_one_below_the_largest_are_released_in_order, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_from(std::nullopt));
    expect_outcome(h.deliver(conf::numbered("LedgerEntry", "top", "a", "9223372036854775806")), outcome::processed);
    expect_outcome(h.deliver(conf::numbered("LedgerEntry", "below", "a", "9223372036854775805")), outcome::duplicate);
    expect_outcome(h.deliver(conf::numbered("LedgerEntry", "again", "a", "9223372036854775806")), outcome::duplicate);
    BOOST_TEST(h.log.size() == 1u);
}

// A first-seen context whose first listener fails keeps its start: the failed number, resent,
// is released rather than counted below the number that came next.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_first_seen_start_outlives_its_failed_listener, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, conf::fail_first("LedgerEntry", 1), conf::ledger_from(std::nullopt));
    expect_outcome(h.deliver(conf::entry("e5", "a", 5)), outcome::failed);
    BOOST_TEST(!b.has_claim({"LedgerEntry", "e5"}), "a resend retries it");
    expect_outcome(h.deliver(conf::entry("e6", "a", 6)), outcome::buffered);
    const auto resent = h.deliver(conf::entry("e5", "a", 5));
    expect_outcome(resent, outcome::processed);
    BOOST_TEST(resent.released == 1u);
    expect_calls(h.log, {"LedgerEntry/e5", "LedgerEntry/e6 (replayed)"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_declared_first_number_is_waited_for, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_from(10));
    expect_outcome(h.deliver(conf::entry("e1", "a", 1)), outcome::duplicate);
    expect_outcome(h.deliver(conf::entry("e11", "a", 11)), outcome::buffered);
    BOOST_TEST(h.deliver(conf::entry("e10", "a", 10)).released == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_failed_number_stays_missing_until_it_succeeds, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, conf::fail_first("LedgerEntry", 1), conf::ledger());
    expect_outcome(h.deliver(conf::entry("e1", "a", 1)), outcome::failed);
    expect_outcome(h.deliver(conf::entry("e2", "a", 2)), outcome::buffered);
    expect_rows(b, "LedgerEntry", "e1", {"FAILED"});
    const auto retried = h.deliver(conf::entry("e1", "a", 1));
    expect_outcome(retried, outcome::processed);
    BOOST_TEST(retried.released == 1u);
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerEntry/e2 (replayed)"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_failed_replay_keeps_the_numbers_after_it_waiting, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, conf::fail_first("LedgerEntry", 1, true), conf::ledger());
    h.deliver(conf::entry("e2", "a", 2));
    h.deliver(conf::entry("e3", "a", 3));
    const auto first = h.deliver(conf::numbered("LedgerCorrection", "c1", "a", "1"));
    BOOST_TEST(first.release_failures == 1u);
    BOOST_TEST(first.released == 0u);
    expect_rows(b, "LedgerEntry", "e2", {"FAILED"});
    expect_rows(b, "LedgerEntry", "e3", {"WAITING"});
    BOOST_TEST(!b.has_claim({"LedgerEntry", "e2"}), "a resend retries it");
    BOOST_TEST(h.deliver(conf::entry("e2", "a", 2)).released == 1u);
    expect_calls(h.log, {"LedgerCorrection/c1", "LedgerEntry/e2", "LedgerEntry/e3 (replayed)"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_long_run_of_waiting_numbers_is_released_page_by_page, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    constexpr int count = 150;  // more than two pages of the release pass
    for (int n = count; n >= 2; --n) h.deliver(conf::entry("e" + std::to_string(n), "a", n));
    const auto first = h.deliver(conf::entry("e1", "a", 1));
    BOOST_TEST(first.released == static_cast<std::size_t>(count - 1));
    BOOST_TEST_REQUIRE(h.log.size() == static_cast<std::size_t>(count));
    const auto calls = conf::calls_of(h.log);
    for (int n = 2; n <= count; ++n) BOOST_TEST(calls[static_cast<std::size_t>(n - 1)] == "LedgerEntry/e" + std::to_string(n) + " (replayed)");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_bounded_buffer_bounds_a_numbered_context, Backend, backends) {
    Backend b;
    auto decls = conf::ledger();
    decls.sequences.front().buffer = {2, si::overflow_policy::dead_letter_newest};
    conf::harness<Backend> h(b, {}, decls);
    for (int n : {2, 3}) expect_outcome(h.deliver(conf::entry("e" + std::to_string(n), "a", n)), outcome::buffered);
    expect_outcome(h.deliver(conf::entry("e4", "a", 4)), outcome::failed);
    BOOST_TEST(conf::join(conf::overflowed_in_sink(b)) == "[LedgerEntry/e4]");
    BOOST_TEST(h.deliver(conf::entry("e1", "a", 1)).released == 2u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(every_numbered_batch_outcome_equals_one_by_one_delivery, Backend, backends) {
    for (const auto& script : conf::numbered_scripts()) conf::expect_batches_agree<Backend, si::propagation::not_supported>(script);
}

#ifndef SEQINBOX_CONFORMANCE_ONE_DIFFERENTIAL
BOOST_AUTO_TEST_CASE_TEMPLATE(every_numbered_batch_outcome_equals_one_by_one_delivery_under_required, Backend, backends) {
    for (const auto& script : conf::numbered_scripts()) conf::expect_batches_agree<Backend, si::propagation::required>(script);
}
#endif

// Inboxes on threads, deliveries and batches, every number of three contexts arriving shuffled
// and twice: each number's listener runs once, in increasing order per context.
BOOST_AUTO_TEST_CASE_TEMPLATE(concurrent_inboxes_release_each_number_once_and_in_order, Backend, backends) {
    using inbox_type = conf::inbox_of<Backend>;
    constexpr int numbers = 40;
    Backend b;
    std::vector<si::envelope> records;
    for (const char* context : {"a", "b", "c"})
        for (int n = 1; n <= numbers; ++n)
            for (int copy = 0; copy < 2; ++copy) records.push_back(conf::entry(std::string(context) + std::to_string(n), context, n));
    std::ranges::shuffle(records, std::mt19937(7));
    for (auto& r : records) b.source.push(r);
    si::testing::call_log log;
    std::vector<std::unique_ptr<inbox_type>> inboxes;
    for (int i = 0; i < 4; ++i) {
        inboxes.push_back(conf::make_inbox<inbox_type>(b, conf::ledger()));
        conf::listen(*inboxes.back(), log, {});
    }
    std::mutex errors_mutex;
    conf::strings errors;
    std::vector<std::thread> workers;
    for (std::size_t i = 0; i < inboxes.size(); ++i)
        workers.emplace_back([&, in = inboxes[i].get(), batches = i % 2 == 0] {
            try {
                while (batches ? !in->poll_batch(5).empty() : in->poll_once().has_value()) {}
            } catch (const std::exception& e) {
                std::lock_guard lock(errors_mutex);
                errors.emplace_back(e.what());
            }
        });
    for (auto& w : workers) w.join();
    BOOST_TEST(errors.empty(), conf::join(errors));
    std::map<std::string, conf::strings> by_context;
    for (const auto& c : log.calls()) by_context[c.context_id].push_back(c.idempotence_id);
    for (const char* context : {"a", "b", "c"}) {
        conf::strings expected;
        for (int n = 1; n <= numbers; ++n) expected.push_back(std::string(context) + std::to_string(n));
        BOOST_TEST(conf::join(by_context[context]) == conf::join(expected), context);
    }
    BOOST_TEST(b.source.acknowledged().size() == records.size());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_timed_out_gap_is_skipped_under_skip, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_with_gap(si::gap_policy::skip));
    h.deliver(conf::entry("e1", "a", 1));
    h.deliver(conf::entry("e4", "a", 4));
    b.clock.advance(std::chrono::seconds(30));
    h.deliver(conf::entry("e5", "a", 5));
    h.deliver(conf::entry("b3", "b", 3));  // b expects 1: its gap is younger
    BOOST_TEST(h.inbox->run_gap_timeouts() == 0u, "not timed out yet");
    b.clock.advance(std::chrono::seconds(31));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u, "a's gap (2 and 3) timed out; b's not yet");
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerEntry/e4 (replayed)", "LedgerEntry/e5 (replayed)"});
    expect_rows(b, "LedgerEntry", "b3", {"WAITING"});
    expect_outcome(h.deliver(conf::entry("e3", "a", 3)), outcome::duplicate);  // skipped numbers arriving late
    expect_outcome(h.deliver(conf::entry("e6", "a", 6)), outcome::processed);
    BOOST_TEST(b.error_sink.records().empty());
    BOOST_TEST(h.inbox->run_gap_timeouts() == 0u, "nothing left to time out in a");
    b.clock.advance(std::chrono::minutes(1));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u, "b's gap now");
    expect_rows(b, "LedgerEntry", "b3", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_timed_out_gap_dead_letters_the_waiting_messages_under_dead_letter, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_with_gap(si::gap_policy::dead_letter));
    h.deliver(conf::entry("e1", "a", 1));
    h.deliver(conf::entry("e3", "a", 3));
    h.deliver(conf::numbered("LedgerCorrection", "c5", "a", "5"));
    b.clock.advance(std::chrono::minutes(2));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u);
    BOOST_TEST(conf::join(conf::gap_timeouts_in_sink(b)) == "[LedgerCorrection/c5, LedgerEntry/e3]");
    expect_rows(b, "LedgerEntry", "e3", {"FAILED"});
    BOOST_TEST(!b.has_claim({"LedgerEntry", "e3"}), "a resend retries it");
    const auto reason = b.error_sink.records().front().reason;
    BOOST_TEST(reason.find("number 2 missing") != std::string::npos, reason);
    expect_outcome(h.deliver(conf::entry("e6", "a", 6)), outcome::processed);  // the context goes on after them
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerEntry/e6"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_held_gap_waits_until_its_numbers_are_skipped, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_with_gap(si::gap_policy::hold));
    h.deliver(conf::entry("e3", "a", 3));
    b.clock.advance(std::chrono::minutes(2));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u, "reported");
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u, "at every run while held");
    expect_rows(b, "LedgerEntry", "e3", {"WAITING"});
    BOOST_TEST(b.error_sink.records().empty());
    // An operator's skip of the gap: the numbers given up; the next run releases what follows.
    const auto instance = b.find_instance("LedgerSequence", "a")->id;
    auto tx = b.store.begin();
    tx.lock_instance(instance);
    tx.skip_numbers(instance, 2);
    tx.commit();
    BOOST_TEST(h.inbox->run_gap_timeouts() == 0u);
    expect_rows(b, "LedgerEntry", "e3", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_operator_skips_a_gap_by_action, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    h.deliver(conf::entry("e1", "a", 1));
    for (int n : {3, 4, 7}) h.deliver(conf::entry("e" + std::to_string(n), "a", n));
    const auto instance = b.find_instance("LedgerSequence", "a")->id;
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::skip_gap, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    expect_calls(h.log, {"LedgerEntry/e1", "LedgerEntry/e3 (replayed)", "LedgerEntry/e4 (replayed)"});
    expect_rows(b, "LedgerEntry", "e7", {"WAITING"});  // the next gap (5, 6) stays
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::skip_gap, b.clock.now())));
    h.inbox->run_pending_actions();
    expect_rows(b, "LedgerEntry", "e7", {"PROCESSED"});
    expect_outcome(h.deliver(conf::entry("e5", "a", 5)), outcome::duplicate);
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::skip_gap, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u, "nothing to skip: executed, logged");
    BOOST_TEST(h.log.size() == 4u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(consume_all_replays_a_numbered_instance_in_number_order, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    for (int n : {6, 3, 9}) h.deliver(conf::entry("e" + std::to_string(n), "a", n));
    const auto instance = b.find_instance("LedgerSequence", "a")->id;
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::consume_all, b.clock.now())));
    h.inbox->run_pending_actions();
    expect_calls(h.log, {"LedgerEntry/e3 (replayed)", "LedgerEntry/e6 (replayed)", "LedgerEntry/e9 (replayed)"});
    expect_outcome(h.deliver(conf::entry("e10", "a", 10)), outcome::processed);
}

// A WAITING row below the expected number (an operator consumed a later one) is not the gap.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_gap_behind_a_row_left_below_the_expected_number_still_times_out, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger_with_gap(si::gap_policy::skip));
    h.deliver(conf::entry("e2", "a", 2));
    h.deliver(conf::entry("e4", "a", 4));
    h.deliver(conf::entry("e7", "a", 7));
    BOOST_TEST(si::accepted(b.store.request_message_action(b.messages_with_key({"LedgerEntry", "e4"}).front().id,
                                                           si::message_action::consume, b.clock.now())));
    h.inbox->run_pending_actions();  // 4 released out of order: 5 expected, 2 left below it
    b.clock.advance(std::chrono::minutes(2));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 1u, "the gap 5 to 6");
    expect_rows(b, "LedgerEntry", "e7", {"PROCESSED"});
    expect_rows(b, "LedgerEntry", "e2", {"WAITING"});
    h.deliver(conf::entry("e9", "a", 9));
    const auto instance = b.find_instance("LedgerSequence", "a")->id;
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::skip_gap, b.clock.now())));
    h.inbox->run_pending_actions();
    expect_rows(b, "LedgerEntry", "e9", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(without_a_gap_timeout_a_gap_waits, Backend, backends) {
    Backend b;
    conf::harness<Backend> h(b, {}, conf::ledger());
    h.deliver(conf::entry("e3", "a", 3));
    b.clock.advance(std::chrono::hours(20));
    BOOST_TEST(h.inbox->run_gap_timeouts() == 0u);
    expect_rows(b, "LedgerEntry", "e3", {"WAITING"});
}

BOOST_AUTO_TEST_SUITE_END()
