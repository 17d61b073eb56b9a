// Review of issue 19's batch path on the in-memory store: cases the batch tests did not cover
// (propagation::required and requires_new with business writes, unsequenced records among
// sequenced ones, two batches waiting for each other across rounds).
#define BOOST_TEST_MODULE batch_review
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/memory/step_driver.hpp"
#include "seqinbox/memory/testing.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using testing::record;

namespace {

template <class Propagation>
struct propagation_policies : default_policies {
    using propagation = Propagation;
};

/// An inbox on the order sequence whose listeners log their calls, write "done/Type/id" into the
/// transaction they are given (if any) and throw for the keys in `failing` (as many times as given).
template <class Propagation>
struct world {
    using inbox_type = memory::basic_inbox<propagation_policies<Propagation>>;
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    testing::call_log calls;
    std::map<claim_key, int> failing;
    inbox_type inbox{store, source, sink, testing::order_declarations()};

    world() {
        for (const auto& msg : inbox.declared().sequences.at(0).messages)
            inbox.on(msg.qualified_type(), [this](const testing::message&, const typename inbox_type::context& ctx) {
                memory::yield_point("listener");
                calls.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
                if (ctx.transaction != nullptr) ctx.transaction->put(done_key(ctx.qualified_type, ctx.idempotence_id), "1");
                if (auto it = failing.find({ctx.qualified_type, ctx.idempotence_id}); it != failing.end() && it->second > 0) {
                    --it->second;
                    throw std::runtime_error("planned failure of " + ctx.idempotence_id);
                }
            });
    }

    static std::string done_key(const std::string& type, const std::string& id) { return "done/" + type + "/" + id; }
};

using row_state = std::tuple<std::string, std::string, message_state>;

std::multiset<row_state> rows_of(const memory::store& store) {
    std::multiset<row_state> rows;
    for (const auto& m : store.messages()) rows.insert({m.type, m.idempotence_id, m.state});
    return rows;
}

std::string calls_text(const testing::call_log& log) {
    std::string text;
    for (const auto& c : log.calls()) text += c.type + "/" + c.idempotence_id + "@" + c.context_id + (c.replayed ? "(r) " : " ");
    return text;
}

/// The differential of test_batch.cpp under another propagation, with the business writes the
/// listeners make in their transaction compared too.
template <class Propagation>
void expect_batches_decide_as_one_by_one(unsigned seeds) {
    const std::vector<std::string> types{"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"};
    for (unsigned seed = 1; seed <= seeds; ++seed) {
        std::mt19937 random(seed);
        auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
        std::vector<envelope> records;
        std::map<claim_key, int> failing;
        std::set<std::string> done_keys;
        const std::size_t count = 1 + pick(30);
        for (std::size_t i = 0; i < count; ++i) {
            const std::string context = "o" + std::to_string(pick(3));
            const std::string& type = types[pick(types.size())];
            const std::string id = type.substr(5, 2) + context + (pick(4) == 0 ? "b" : "a");
            records.push_back(record(type, id, context));
            done_keys.insert(world<Propagation>::done_key(type, id));
            if (pick(8) == 0) failing[{type, id}] = 1 + static_cast<int>(pick(2));
            if (pick(5) == 0) records.push_back(records[pick(records.size())]);
        }
        world<Propagation> single, batched;
        single.failing = failing;
        batched.failing = failing;
        std::vector<delivery_result> one_by_one, in_batches;
        for (const auto& r : records) one_by_one.push_back(single.inbox.deliver(r));
        for (std::size_t at = 0; at < records.size();) {
            const std::size_t size = std::min(records.size() - at, 1 + pick(12));
            auto part = batched.inbox.deliver_batch(std::vector<envelope>(records.begin() + at, records.begin() + at + size));
            in_batches.insert(in_batches.end(), part.begin(), part.end());
            at += size;
        }
        BOOST_TEST_CONTEXT("seed " << seed) {
            BOOST_TEST_REQUIRE(in_batches.size() == one_by_one.size());
            for (std::size_t i = 0; i < records.size(); ++i) {
                BOOST_TEST((in_batches[i].outcome == one_by_one[i].outcome), "record " << i);
                BOOST_TEST(in_batches[i].released == one_by_one[i].released, "record " << i);
                BOOST_TEST(in_batches[i].release_failures == one_by_one[i].release_failures, "record " << i);
            }
            BOOST_TEST((rows_of(batched.store) == rows_of(single.store)));
            BOOST_TEST(batched.sink.size() == single.sink.size());
            for (const auto& context : {"o0", "o1", "o2"}) BOOST_TEST((batched.calls.order_of(context) == single.calls.order_of(context)));
            for (const auto& key : done_keys)
                BOOST_TEST(memory::testing::kv_get(batched.store, key).has_value() == memory::testing::kv_get(single.store, key).has_value(),
                           key);
            BOOST_TEST(batched.store.open_transaction_count() == 0u);
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(batches_decide_as_one_by_one_delivery_does_under_required) {
    expect_batches_decide_as_one_by_one<propagation::required>(500);
}

BOOST_AUTO_TEST_CASE(batches_decide_as_one_by_one_delivery_does_under_requires_new) {
    expect_batches_decide_as_one_by_one<propagation::requires_new>(500);
}

// One by one, a record without a context id (handled directly) runs after the sequenced record
// before it; a batch must call the listeners in the same order.
BOOST_AUTO_TEST_CASE(an_unsequenced_record_of_a_batch_runs_after_the_records_before_it) {
    world<propagation::not_supported> single, batched;
    const std::vector<envelope> records{record("OrderCreated", "c1", "o1"), record("OrderValidated", "v9", "")};
    for (const auto& r : records) single.inbox.deliver(r);
    batched.inbox.deliver_batch(records);
    BOOST_TEST(calls_text(single.calls) == "OrderCreated/c1@o1 OrderValidated/v9@ ");
    BOOST_TEST(calls_text(batched.calls) == calls_text(single.calls));
}

// Issue 19: "instance locks taken in id order after the claims (a fixed order, so that two
// batches never deadlock on inbox rows)". Batch A lost the claim of v1 in its first round and
// holds o2's lock; v1's claim is deleted meanwhile (its replay failed); batch B claims v1 and waits
// for o2's lock; A's second round claims v1 again (its second copy) and waits for B.
BOOST_AUTO_TEST_CASE(two_batches_do_not_wait_for_each_other_across_rounds) {
    using inbox_type = world<propagation::not_supported>::inbox_type;
    world<propagation::not_supported> w;
    inbox_type other{w.store, w.source, w.sink, testing::order_declarations()};
    for (const auto& msg : other.declared().sequences.at(0).messages)
        other.on(msg.qualified_type(), [](const testing::message&, const inbox_type::context&) {});
    w.inbox.deliver(record("OrderValidated", "v1", "o1"));  // o1 first: the lower instance id; v1 WAITING, claimed
    w.inbox.deliver(record("OrderCreated", "c2", "o2"));
    BOOST_TEST_REQUIRE(w.store.find_instance("OrderSequence", "o1")->id < w.store.find_instance("OrderSequence", "o2")->id);

    memory::step_driver driver{w.store};
    const std::vector<envelope> batch_a{record("OrderValidated", "v1", "o1"), record("OrderValidated", "v2", "o2"),
                                        record("OrderValidated", "v1", "o1")};
    const std::vector<envelope> batch_b{record("OrderValidated", "v1", "o1"), record("OrderPrepared", "p2", "o2")};
    auto a = driver.spawn("A", [&] { w.inbox.deliver_batch(batch_a); });
    driver.run_until(a, "listener");  // v2's listener: A holds o2's lock, lost v1's claim
    BOOST_TEST_REQUIRE(w.calls.count("OrderValidated", "v2") == 0u);

    w.failing[{"OrderValidated", "v1"}] = 1;  // meanwhile v1 is released and fails: its claim is deleted
    w.inbox.deliver(record("OrderCreated", "c1", "o1"));
    BOOST_TEST_REQUIRE(!memory::testing::has_claim(w.store, {"OrderValidated", "v1"}));

    auto b = driver.spawn("B", [&] { other.deliver_batch(batch_b); });
    for (int i = 0; i < 200 && !driver.done(a) && !driver.done(b); ++i) {
        driver.step(b);
        driver.step(a);
    }
    const bool a_blocked = driver.status(a) == memory::task_status::blocked;
    const bool b_blocked = driver.status(b) == memory::task_status::blocked;
    BOOST_TEST(!(a_blocked && b_blocked), "deadlock: A blocked at " << driver.position(a) << ", B blocked at " << driver.position(b));
}
