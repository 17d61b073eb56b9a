// deliver_batch on the in-memory store: every result is the one delivering the records one after
// another would give, all of the batch commits at once, and the error sink hears after the commit.
#define BOOST_TEST_MODULE batch
#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "seqinbox/claim/check_then_insert.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/memory/testing.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using testing::record;

namespace {

/// An inbox on the order sequence whose listeners log their calls and throw for the keys in
/// `failing` (each as many times as given).
template <class Policies = default_policies>
struct basic_batch_world {
    using inbox_type = memory::basic_inbox<Policies>;
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    testing::call_log calls;
    std::map<claim_key, int> failing;
    std::unique_ptr<inbox_type> inbox;

    basic_batch_world() : inbox(std::make_unique<inbox_type>(store, source, sink, testing::order_declarations())) {
        for (const auto& msg : inbox->declared().sequences.at(0).messages)
            inbox->on(msg.qualified_type(), [this](const testing::message&, const typename inbox_type::context& ctx) {
                calls.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
                if (auto it = failing.find({ctx.qualified_type, ctx.idempotence_id}); it != failing.end() && it->second > 0) {
                    --it->second;
                    throw std::runtime_error("planned failure of " + ctx.idempotence_id);
                }
            });
    }

    std::vector<delivery_result> batch(const std::vector<envelope>& records, const batch_hooks& hooks = {}) {
        return inbox->deliver_batch(records, hooks);
    }
};

using batch_world = basic_batch_world<>;

template <class Claim, class Propagation>
struct policies_of : default_policies {
    using claim = Claim;
    using propagation = Propagation;
};

using every_policy = boost::mpl::list<policies_of<claim::insert_first, propagation::not_supported>,
                                      policies_of<claim::insert_first, propagation::required>,
                                      policies_of<claim::insert_first, propagation::requires_new>,
                                      policies_of<claim::check_then_insert, propagation::not_supported>,
                                      policies_of<claim::check_then_insert, propagation::required>,
                                      policies_of<claim::check_then_insert, propagation::requires_new>>;

std::vector<outcome> outcomes(const std::vector<delivery_result>& results) {
    std::vector<outcome> o;
    for (const auto& r : results) o.push_back(r.outcome);
    return o;
}

using row_state = std::tuple<std::string, std::string, message_state>;

std::multiset<row_state> rows_of(const memory::store& store) {
    std::multiset<row_state> rows;
    for (const auto& m : store.messages()) rows.insert({m.type, m.idempotence_id, m.state});
    return rows;
}

std::map<std::string, instance_state> instances_of(const memory::store& store) {
    std::map<std::string, instance_state> states;
    for (const auto& i : store.instances()) states[i.context_id] = i.state;
    return states;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_successor_and_its_predecessor_in_one_batch_are_released_within_it) {
    batch_world w;
    const auto flushes_before = memory::testing::wal_flushes(w.store);
    auto results = w.batch({record("OrderValidated", "v1", "o1"), record("OrderCreated", "c1", "o1")});
    BOOST_TEST((outcomes(results) == std::vector{outcome::buffered, outcome::processed}));
    BOOST_TEST(results[1].released == 1u);
    BOOST_TEST((w.calls.order_of("o1") == std::vector<std::string>{"OrderCreated", "OrderValidated"}));
    BOOST_TEST(memory::testing::wal_flushes(w.store) - flushes_before == 1u, "one commit flush for the whole batch");
    for (const auto& m : w.store.messages()) BOOST_TEST((m.state == message_state::processed));
}

BOOST_AUTO_TEST_CASE(a_duplicate_within_a_batch_is_skipped) {
    batch_world w;
    auto results = w.batch({record("OrderCreated", "c1", "o1"), record("OrderCreated", "c1", "o1")});
    BOOST_TEST((outcomes(results) == std::vector{outcome::processed, outcome::duplicate}));
    BOOST_TEST(w.calls.count("OrderCreated", "c1") == 1u);
    BOOST_TEST(w.store.messages().size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_listener_failure_fails_only_its_message_and_the_sink_hears_after_the_commit) {
    batch_world w;
    w.failing[{"OrderValidated", "v1"}] = 1;
    std::size_t sink_at_commit = 99;
    auto results = w.batch({record("OrderCreated", "c1", "o1"), record("OrderValidated", "v1", "o1"), record("OrderPrepared", "p1", "o1")},
                           {.before_commit = [&] { sink_at_commit = w.sink.size(); }});
    BOOST_TEST((outcomes(results) == std::vector{outcome::processed, outcome::failed, outcome::processed}));
    BOOST_TEST(sink_at_commit == 0u, "the error sink heard before the commit");
    BOOST_TEST_REQUIRE(w.sink.size() == 1u);
    BOOST_TEST(w.sink.records()[0].idempotence_id == "v1");
    BOOST_TEST(!memory::testing::has_claim(w.store, {"OrderValidated", "v1"}), "the claim stays: a resend could not retry");
    BOOST_TEST(memory::testing::has_claim(w.store, {"OrderPrepared", "p1"}));
    const auto rows = rows_of(w.store);
    BOOST_TEST(rows.contains({"OrderValidated", "v1", message_state::failed}));
    BOOST_TEST(rows.contains({"OrderPrepared", "p1", message_state::processed}));
}

BOOST_AUTO_TEST_CASE(a_resend_within_the_batch_retries_a_message_that_failed_earlier_in_it) {
    batch_world w;
    w.failing[{"OrderCreated", "c1"}] = 1;
    auto results = w.batch({record("OrderCreated", "c1", "o1"), record("OrderCreated", "c1", "o1")});
    BOOST_TEST((outcomes(results) == std::vector{outcome::failed, outcome::processed}));
    BOOST_TEST(w.calls.count("OrderCreated", "c1") == 2u);
    BOOST_TEST(rows_of(w.store) == (std::multiset<row_state>{{"OrderCreated", "c1", message_state::processed}}));
}

BOOST_AUTO_TEST_CASE(a_failed_release_within_the_batch_lets_a_later_resend_of_it_run) {
    batch_world w;
    w.failing[{"OrderValidated", "v1"}] = 1;
    auto results = w.batch({record("OrderValidated", "v1", "o1"), record("OrderCreated", "c1", "o1"), record("OrderValidated", "v1", "o1")});
    BOOST_TEST((outcomes(results) == std::vector{outcome::buffered, outcome::processed, outcome::processed}));
    BOOST_TEST(results[1].release_failures == 1u);
    BOOST_TEST(w.calls.count("OrderValidated", "v1") == 2u);
    BOOST_TEST(rows_of(w.store) == (std::multiset<row_state>{{"OrderCreated", "c1", message_state::processed},
                                                             {"OrderValidated", "v1", message_state::processed}}));
}

BOOST_AUTO_TEST_CASE(a_released_message_that_fails_reaches_the_error_sink_before_the_commit) {
    batch_world w;
    w.failing[{"OrderValidated", "v1"}] = 1;
    std::size_t sink_at_commit = 99;
    auto results = w.batch({record("OrderValidated", "v1", "o1"), record("OrderCreated", "c1", "o1")},
                           {.before_commit = [&] { sink_at_commit = w.sink.size(); }});
    BOOST_TEST(results[1].release_failures == 1u);
    BOOST_TEST(sink_at_commit == 1u, "no source brings a released message back: a crash after the commit would lose it");
    BOOST_TEST(w.sink.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_resent_failed_message_buffered_in_a_batch_is_released_by_a_later_one_in_it) {
    batch_world w;
    for (const auto& r : {record("OrderShipped", "s1", "o1"), record("OrderCreated", "c1", "o1"), record("OrderPrepared", "p1", "o1")})
        w.inbox->deliver(r);
    w.failing[{"OrderShipped", "s1"}] = 1;
    BOOST_TEST_REQUIRE(seqinbox::accepted(w.store.request_instance_action(w.store.find_instance("OrderSequence", "o1")->id, instance_action::consume_all,
                                                       timestamp{})));
    w.inbox->run_pending_actions();
    BOOST_TEST_REQUIRE(rows_of(w.store).contains({"OrderShipped", "s1", message_state::failed}));
    auto results = w.batch({record("OrderShipped", "s1", "o1"), record("OrderValidated", "v1", "o1")});
    BOOST_TEST((outcomes(results) == std::vector{outcome::buffered, outcome::processed}));
    BOOST_TEST(results[1].released == 1u);
    BOOST_TEST(rows_of(w.store).contains({"OrderShipped", "s1", message_state::processed}));
}

BOOST_AUTO_TEST_CASE(a_before_commit_hook_that_throws_stores_nothing_and_tells_no_one) {
    batch_world w;
    w.failing[{"OrderValidated", "v1"}] = 1;
    BOOST_CHECK_THROW(w.batch({record("OrderCreated", "c1", "o1"), record("OrderValidated", "v1", "o1"), record("Nonsense", "n1", "o1")},
                              {.before_commit = [] { throw std::runtime_error("broker said no"); }}),
                      std::runtime_error);
    BOOST_TEST(w.store.messages().empty());
    BOOST_TEST(w.store.claim_count() == 0u);
    BOOST_TEST(w.sink.size() == 0u);
    BOOST_TEST(w.store.open_transaction_count() == 0u);
}

BOOST_AUTO_TEST_CASE(poll_batch_acknowledges_every_record_after_the_commit) {
    batch_world w;
    for (const auto& r : {record("OrderShipped", "s1", "o1"), record("OrderCreated", "c1", "o1"), record("OrderPrepared", "p1", "o1"),
                          record("OrderValidated", "v1", "o1"), record("OrderCreated", "c2", "o2")})
        w.source.push(r);
    auto results = w.inbox->poll_batch(4);
    BOOST_TEST(results.size() == 4u);
    BOOST_TEST(w.source.acknowledged().size() == 4u);
    BOOST_TEST(w.source.pending() == 1u);
    BOOST_TEST((w.calls.order_of("o1") == std::vector<std::string>{"OrderCreated", "OrderPrepared", "OrderValidated", "OrderShipped"}));
    BOOST_TEST(rows_of(w.store).count({"OrderShipped", "s1", message_state::processed}) == 1u);
}

std::set<claim_key> claims_of(const memory::store& store) {
    std::set<claim_key> claims;
    for (const auto& m : store.messages())
        if (memory::testing::has_claim(store, m.key())) claims.insert(m.key());
    return claims;
}

/// The same operator action in both worlds, then run: on a WAITING message (consume or expire)
/// or on a context's instance (consume all or close).
template <class World, class Pick>
void act_alike(World& a, World& b, Pick& pick) {
    std::vector<message_record> waiting;
    for (const auto& m : a.store.messages())
        if (m.state == message_state::waiting) waiting.push_back(m);
    const std::string context = "o" + std::to_string(pick(3));
    const std::size_t kind = pick(4);
    const std::size_t which = waiting.empty() ? 0 : pick(waiting.size());
    for (World* w : {&a, &b}) {
        if (kind < 2 && !waiting.empty()) {
            for (const auto& m : w->store.messages())
                if (m.key() == waiting[which].key() && m.state == message_state::waiting)
                    seqinbox::accepted(w->store.request_message_action(m.id, kind == 0 ? message_action::consume : message_action::expire, timestamp{}));
        } else if (auto i = w->store.find_instance("OrderSequence", context)) {
            seqinbox::accepted(w->store.request_instance_action(i->id, kind == 2 ? instance_action::consume_all : instance_action::close, timestamp{}));
        }
        w->inbox->run_pending_actions();
    }
}

// The property: any records, any cut into batches, operator actions between them, the same
// results and rows as one by one,
// whatever the claim strategy and propagation.
#ifndef SEQINBOX_BATCH_PROPERTY_SEEDS
#define SEQINBOX_BATCH_PROPERTY_SEEDS 2000  // fewer in the sanitized tree (tests/memory/CMakeLists.txt)
#endif
BOOST_AUTO_TEST_CASE_TEMPLATE(batches_decide_as_one_by_one_delivery_does, Policies, every_policy) {
    const std::vector<std::string> types{"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"};
    for (unsigned seed = 1; seed <= SEQINBOX_BATCH_PROPERTY_SEEDS; ++seed) {
        std::mt19937 random(seed);
        auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
        std::vector<envelope> records;
        std::map<claim_key, int> failing;
        const std::size_t count = 1 + pick(30);
        for (std::size_t i = 0; i < count; ++i) {
            const std::string context = "o" + std::to_string(pick(3));
            const std::string& type = types[pick(types.size())];
            const std::string id = type.substr(5, 2) + context + (pick(4) == 0 ? "b" : "a");
            records.push_back(record(type, id, context));
            if (pick(8) == 0) failing[{type, id}] = 1 + static_cast<int>(pick(2));
            if (pick(5) == 0) records.push_back(records[pick(records.size())]);
        }
        basic_batch_world<Policies> single, batched;
        single.failing = failing;
        batched.failing = failing;
        std::vector<delivery_result> one_by_one, in_batches;
        for (std::size_t at = 0; at < records.size();) {
            const std::size_t size = std::min(records.size() - at, 1 + pick(12));
            for (std::size_t i = at; i < at + size; ++i) one_by_one.push_back(single.inbox->deliver(records[i]));
            auto part = batched.batch(std::vector<envelope>(records.begin() + at, records.begin() + at + size));
            in_batches.insert(in_batches.end(), part.begin(), part.end());
            at += size;
            if (pick(4) == 0) act_alike(single, batched, pick);
        }
        BOOST_TEST_CONTEXT("seed " << seed) {
            BOOST_TEST_REQUIRE(in_batches.size() == one_by_one.size());
            for (std::size_t i = 0; i < records.size(); ++i) {
                BOOST_TEST((in_batches[i].outcome == one_by_one[i].outcome), "record " << i);
                BOOST_TEST(in_batches[i].released == one_by_one[i].released, "record " << i);
                BOOST_TEST(in_batches[i].release_failures == one_by_one[i].release_failures, "record " << i);
            }
            BOOST_TEST((rows_of(batched.store) == rows_of(single.store)));
            BOOST_TEST((instances_of(batched.store) == instances_of(single.store)));
            BOOST_TEST((claims_of(batched.store) == claims_of(single.store)));
            BOOST_TEST(batched.sink.size() == single.sink.size());
            BOOST_TEST(batched.calls.size() == single.calls.size());
            for (const auto& context : {"o0", "o1", "o2"}) BOOST_TEST((batched.calls.order_of(context) == single.calls.order_of(context)));
        }
    }
}

// Threads deciding batches of one shared source at once, duplicates and all: every message once,
// in the declared order, nothing left open or unacknowledged.
BOOST_AUTO_TEST_CASE(concurrent_batches_process_every_message_once_and_in_order) {
    const std::vector<std::string> types{"OrderShipped", "OrderValidated", "OrderPrepared", "OrderCreated"};
    batch_world w;
    std::mt19937 random(7);
    std::vector<envelope> records;
    for (int context = 0; context < 40; ++context)
        for (const auto& type : types) {
            const auto r = record(type, type + std::to_string(context), "o" + std::to_string(context));
            records.push_back(r);
            if (random() % 3 == 0) records.push_back(r);
        }
    std::ranges::shuffle(records, random);
    for (const auto& r : records) w.source.push(r);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            while (!w.inbox->poll_batch(7).empty()) {
            }
        });
    for (auto& t : threads) t.join();
    BOOST_TEST(w.source.acknowledged().size() == records.size());
    BOOST_TEST(w.store.open_transaction_count() == 0u);
    for (int context = 0; context < 40; ++context) {
        const auto order = w.calls.order_of("o" + std::to_string(context));
        BOOST_TEST_CONTEXT("context o" << context) {
            BOOST_TEST_REQUIRE(order.size() == types.size(), "every type once");
            BOOST_TEST(order.front() == "OrderCreated");
            BOOST_TEST(order.back() == "OrderShipped");
        }
    }
}
