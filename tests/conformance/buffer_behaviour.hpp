#pragma once
// The conformance suite's cases of bounded buffers (maxWaiting and its overflow policies,
// seqinbox/declare/buffer_limit.hpp): what every store must do when a message must wait in an
// instance whose buffer is full. Include it after conformance/batch_behaviour.hpp.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "conformance/batch_behaviour.hpp"

namespace seqinbox::conformance {

/// The order declarations with a buffer of `max_waiting` messages per instance and `policy`.
inline declarations<message> bounded_orders(std::size_t max_waiting, overflow_policy policy) {
    auto decls = testing::order_declarations();
    decls.sequences.front().buffer = {max_waiting, policy};
    return decls;
}

/// The error-sink records of kind buffer_overflow, as "Type/id".
template <class B>
strings overflowed_in_sink(B& b) {
    strings keys;
    for (const auto& f : b.error_sink.records())
        if (f.kind == failure_kind::buffer_overflow) keys.push_back(f.qualified_type + "/" + f.idempotence_id);
    std::ranges::sort(keys);
    return keys;
}

/// Runs `attempt`, which must fail as a full buffer under reject does: retryably, with the code
/// that tells it from other retryable errors (the relay's), naming the limit of 2.
template <class Attempt>
void expect_rejected_as_full(Attempt attempt, const char* what) {
    try {
        attempt();
        BOOST_FAIL(what << " must fail: a full buffer under reject");
    } catch (const error& e) {
        BOOST_TEST((e.category() == error_category::retryable));
        BOOST_TEST(e.sqlstate() == buffer_full_sqlstate, "what tells a full buffer from other retryable errors (the relay)");
        BOOST_TEST(std::string(e.what()).find("maxWaiting 2") != std::string::npos, e.what());
    }
}

/// Scripts for the batch differential: full buffers under each dead-letter policy, with
/// releases making room again and resends of what was dead-lettered.
inline std::vector<delivery_script> overflow_scripts() {
    std::vector<delivery_script> scripts;
    for (overflow_policy policy : {overflow_policy::dead_letter_newest, overflow_policy::dead_letter_instance}) {
        delivery_script s{"buffer of 2, " + std::string(to_string(policy)), {}, {}, bounded_orders(2, policy)};
        s.records = {rec("OrderValidated", "v1", "o1"), rec("OrderPrepared", "p1", "o1"), rec("OrderValidated", "v2", "o2"),
                     rec("OrderExpedited", "e1", "o1"), rec("OrderValidated", "v3", "o1"), rec("OrderValidated", "v1", "o1"),
                     rec("OrderCreated", "c1", "o1"), rec("OrderExpedited", "e1", "o1"), rec("OrderValidated", "v4", "o2"),
                     rec("OrderValidated", "v5", "o2"), rec("OrderShipped", "s1", "o1"), rec("OrderCreated", "c2", "o2")};
        scripts.push_back(s);
    }
    return scripts;
}

}  // namespace seqinbox::conformance

BOOST_AUTO_TEST_SUITE(bounded_buffers)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_calls;
using conf::expect_outcome;
using conf::expect_rows;
using conf::harness;
using si::outcome;

BOOST_AUTO_TEST_CASE_TEMPLATE(a_full_buffer_dead_letters_the_newest_arrival, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::bounded_orders(2, si::overflow_policy::dead_letter_newest));
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderValidated", "v3", "o1"), outcome::failed);
    expect_rows(b, "OrderValidated", "v3", {"FAILED"});
    BOOST_TEST(!b.has_claim({"OrderValidated", "v3"}), "a resend retries it");
    BOOST_TEST(conf::join(conf::overflowed_in_sink(b)) == "[OrderValidated/v3]");
    BOOST_TEST_REQUIRE(b.error_sink.size() == 1u);
    const std::string reason = b.error_sink.records().front().reason;
    BOOST_TEST(reason.find("maxWaiting 2") != std::string::npos, reason);
    BOOST_TEST(reason.find("dead-letter-newest") != std::string::npos, reason);
    expect_rows(b, "OrderValidated", "v1", {"WAITING"});
    expect_rows(b, "OrderPrepared", "p1", {"WAITING"});
    expect_outcome(h.deliver("OrderValidated", "v2", "o2"), outcome::buffered);  // another instance has its own buffer

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 2);
    expect_outcome(h.deliver("OrderValidated", "v3", "o1"), outcome::processed);
    expect_rows(b, "OrderValidated", "v3", {"PROCESSED"});
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)", "OrderPrepared/p1 (replayed)", "OrderValidated/v3"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_full_buffer_dead_letters_every_waiting_message_of_the_instance, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::bounded_orders(2, si::overflow_policy::dead_letter_instance));
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderValidated", "v2", "o2"), outcome::buffered);
    expect_outcome(h.deliver("OrderValidated", "v3", "o1"), outcome::failed);
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v1"}, {"OrderPrepared", "p1"}, {"OrderValidated", "v3"}}) {
        expect_rows(b, type, id, {"FAILED"});
        BOOST_TEST(!b.has_claim({type, id}), type << "/" << id << ": a resend retries it");
    }
    BOOST_TEST(conf::join(conf::overflowed_in_sink(b)) == "[OrderPrepared/p1, OrderValidated/v1, OrderValidated/v3]");
    BOOST_TEST(b.error_sink.size() == 3u);
    const auto records = b.error_sink.records();
    BOOST_TEST(std::ranges::all_of(records, [](const auto& f) { return f.context_id == "o1"; }));
    expect_rows(b, "OrderValidated", "v2", {"WAITING"});  // the other instance keeps its buffer

    // The buffer is empty again: new arrivals wait, resends of the dead-lettered ones too.
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::buffered);
    conf::expect_releasing(h, "o1", "OrderCreated/c1", 1);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::processed);
    expect_calls(h.log, {"OrderCreated/c1", "OrderPrepared/p1 (replayed)", "OrderValidated/v1"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_full_buffer_rejects_the_delivery_retryably_under_reject, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::bounded_orders(2, si::overflow_policy::reject));
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::buffered);
    for (int attempt = 0; attempt < 2; ++attempt)
        conf::expect_rejected_as_full([&] { h.deliver("OrderValidated", "v3", "o1"); }, "a delivery");
    BOOST_TEST(b.messages_with_key({"OrderValidated", "v3"}).empty());
    BOOST_TEST(!b.has_claim({"OrderValidated", "v3"}));
    BOOST_TEST(b.error_sink.size() == 0u);
    const std::vector<si::envelope> batch{si::testing::record("OrderValidated", "v4", "o2"), si::testing::record("OrderValidated", "v3", "o1")};
    conf::expect_rejected_as_full([&] { h.inbox->deliver_batch(batch); }, "a batch");
    BOOST_TEST(b.messages_with_key({"OrderValidated", "v4"}).empty(), "the batch committed nothing");

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 2);
    expect_outcome(h.deliver("OrderValidated", "v3", "o1"), outcome::processed);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)", "OrderPrepared/p1 (replayed)", "OrderValidated/v3"});
}

// A polled batch a full buffer rejects keeps the records before the rejected one: decided and
// acknowledged, so that retries while the buffer stays full do not run their listeners again
// and again (before: the whole batch rolled back at every attempt).
BOOST_AUTO_TEST_CASE_TEMPLATE(a_polled_batch_keeps_the_records_before_the_one_a_full_buffer_rejects, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::bounded_orders(2, si::overflow_policy::reject));
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::buffered);
    for (const auto& [type, id, context] : {std::tuple{"OrderCreated", "c2", "o2"}, {"OrderValidated", "v3", "o1"}, {"OrderCreated", "c3", "o3"}})
        b.source.push(si::testing::record(type, id, context));
    for (int attempt = 0; attempt < 3; ++attempt) {
        conf::expect_rejected_as_full([&] { h.inbox->poll_batch(10); }, "a polled batch");
        b.source.redeliver_unacknowledged();  // as a consumer that did not commit their offsets meets them again
    }
    expect_rows(b, "OrderCreated", "c2", {"PROCESSED"});
    BOOST_TEST(h.log.count("OrderCreated", "c2") == 2u, "once in the rolled-back attempt, once kept: not at every retry");
    BOOST_TEST(b.source.acknowledged().size() == 1u);
    BOOST_TEST(b.messages_with_key({"OrderValidated", "v3"}).empty());
    BOOST_TEST(b.messages_with_key({"OrderCreated", "c3"}).empty(), "behind the rejected record: given back");
    BOOST_TEST(h.log.count("OrderCreated", "c3") == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_batch_counts_what_it_buffered_itself, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::bounded_orders(2, si::overflow_policy::dead_letter_newest));
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    const std::vector<si::envelope> batch{si::testing::record("OrderPrepared", "p1", "o1"), si::testing::record("OrderExpedited", "e1", "o1")};
    const auto results = h.inbox->deliver_batch(batch);
    BOOST_TEST_REQUIRE(results.size() == 2u);
    expect_outcome(results[0], outcome::buffered);
    expect_outcome(results[1], outcome::failed);
    expect_rows(b, "OrderPrepared", "p1", {"WAITING"});
    expect_rows(b, "OrderExpedited", "e1", {"FAILED"});
    BOOST_TEST(conf::join(conf::overflowed_in_sink(b)) == "[OrderExpedited/e1]");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(count_waiting_sees_committed_and_own_rows_up_to_its_bound, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    for (const char* id : {"v1", "v2", "v3"}) expect_outcome(h.deliver("OrderValidated", id, "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderValidated", "v9", "o2"), outcome::buffered);
    const auto instance = b.find_instance("OrderSequence", "o1");
    BOOST_TEST_REQUIRE(instance.has_value());
    auto tx = b.store.begin();
    BOOST_TEST(tx.count_waiting(instance->id, 100) == 3u);
    BOOST_TEST(tx.count_waiting(instance->id, 2) == 2u, "counted no further than asked");
    const auto v1 = b.messages_with_key({"OrderValidated", "v1"}).front();
    tx.update_message_state(v1.id, si::message_state::processed, v1.created_at);
    si::message_record own = v1;
    own.id = 0;
    for (const char* id : {"v4", "v5"}) {
        own.idempotence_id = id;
        tx.insert_message(own);
    }
    BOOST_TEST(tx.count_waiting(instance->id, 100) == 4u, "one made PROCESSED, two new: its own writes");
    auto other = b.store.begin();
    BOOST_TEST(other.count_waiting(instance->id, 100) == 3u, "not another transaction's uncommitted writes");
    other.rollback();
    tx.rollback();
    BOOST_TEST(b.store.begin().count_waiting(instance->id, 100) == 3u);
}

// The bound holds under concurrency: the check runs under the instance lock every delivery and
// batch of the context takes, so concurrent arrivals cannot all see room.
BOOST_AUTO_TEST_CASE_TEMPLATE(concurrent_deliveries_and_batches_never_overshoot_the_bound, Backend, backends) {
    using inbox_type = conf::inbox_of<Backend>;
    constexpr std::size_t limit = 5, arrivals = 80;
    Backend b;
    const auto decls = conf::bounded_orders(limit, si::overflow_policy::dead_letter_newest);
    for (std::size_t i = 0; i < arrivals; ++i) b.source.push(si::testing::record("OrderValidated", "v" + std::to_string(i), "o1"));
    si::testing::call_log log;
    std::vector<std::unique_ptr<inbox_type>> inboxes;
    for (int i = 0; i < 6; ++i) {
        inboxes.push_back(conf::make_inbox<inbox_type>(b, decls));
        conf::listen(*inboxes.back(), log, {});
    }
    std::mutex errors_mutex;
    conf::strings errors;
    std::vector<std::thread> workers;
    for (std::size_t i = 0; i < inboxes.size(); ++i)
        workers.emplace_back([&, in = inboxes[i].get(), batches = i % 2 == 0] {
            try {
                while (batches ? !in->poll_batch(3).empty() : in->poll_once().has_value()) {}
            } catch (const std::exception& e) {
                std::lock_guard lock(errors_mutex);
                errors.emplace_back(e.what());
            }
        });
    for (auto& w : workers) w.join();
    BOOST_TEST(errors.empty(), conf::join(errors));
    std::size_t waiting = 0, failed = 0;
    for (const auto& row : b.messages()) (row.state == si::message_state::waiting ? waiting : failed) += 1;
    BOOST_TEST(waiting == limit);
    BOOST_TEST(failed == arrivals - limit);
    BOOST_TEST(conf::overflowed_in_sink(b).size() == arrivals - limit);
    BOOST_TEST(b.claim_count() == limit, "the dead-lettered lost their claims");
    BOOST_TEST(b.source.acknowledged().size() == arrivals);
    BOOST_TEST(log.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(batches_agree_with_one_by_one_delivery_when_buffers_overflow, Backend, backends) {
    for (const auto& script : conf::overflow_scripts()) conf::expect_batches_agree<Backend, si::propagation::not_supported>(script);
}

BOOST_AUTO_TEST_SUITE_END()
