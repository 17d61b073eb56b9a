// Review of issue 19's batch path on the in-memory store: cases the batch tests did not cover
// (unsequenced records among sequenced ones, two batches waiting for each other across rounds).
#define BOOST_TEST_MODULE batch_review
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <memory>
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

/// An inbox on the order sequence whose listeners log their calls and throw for the keys in
/// `failing` (as many times as given).
struct world {
    using inbox_type = memory::inbox;
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    testing::call_log calls;
    std::map<claim_key, int> failing;
    inbox_type inbox{store, source, sink, testing::order_declarations()};

    explicit world(memory::store_options options = {}) : store(options) {
        for (const auto& msg : inbox.declared().sequences.at(0).messages)
            inbox.on(msg.qualified_type(), [this](const testing::message&, const inbox_type::context& ctx) {
                memory::yield_point("listener");
                calls.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
                if (auto it = failing.find({ctx.qualified_type, ctx.idempotence_id}); it != failing.end() && it->second > 0) {
                    --it->second;
                    throw std::runtime_error("planned failure of " + ctx.idempotence_id);
                }
            });
    }
};

std::string calls_text(const testing::call_log& log) {
    std::string text;
    for (const auto& c : log.calls()) text += c.type + "/" + c.idempotence_id + "@" + c.context_id + (c.replayed ? "(r) " : " ");
    return text;
}

}  // namespace

// One by one, a record without a context id (handled directly) runs after the sequenced record
// before it; a batch must call the listeners in the same order.
BOOST_AUTO_TEST_CASE(an_unsequenced_record_of_a_batch_runs_after_the_records_before_it) {
    world single, batched;
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
    using inbox_type = world::inbox_type;
    world w;
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

// Issue 33, item 6: one by one, `c1 c1 v9` (c1 fails, its resend runs, then the record without a
// context id); a batch decides the resend in a later round, and the unsequenced record must not
// overtake it.
BOOST_AUTO_TEST_CASE(an_unsequenced_record_does_not_overtake_a_resend_decided_in_a_later_round) {
    world single, batched;
    for (world* w : {&single, &batched}) w->failing[{"OrderCreated", "c1"}] = 1;
    const std::vector<envelope> records{record("OrderCreated", "c1", "o1"), record("OrderCreated", "c1", "o1"),
                                        record("OrderValidated", "v9", ""), record("OrderCreated", "c2", "o2")};
    for (const auto& r : records) single.inbox.deliver(r);
    batched.inbox.deliver_batch(records);
    BOOST_TEST(calls_text(single.calls) == "OrderCreated/c1@o1 OrderCreated/c1@o1 OrderValidated/v9@ OrderCreated/c2@o2 ");
    BOOST_TEST(calls_text(batched.calls) == calls_text(single.calls));
}

// Issue 33, item 2: a store that reports max_batch_records gets batches in parts that fit its lock
// table; one whose limit the engine could not see would fail with 53200 (here: a budget of two
// stored keys and no limit reported).
BOOST_AUTO_TEST_CASE(a_batch_is_split_into_parts_that_fit_the_lock_table) {
    std::vector<envelope> records;
    for (const char* id : {"c1", "c2", "c3", "c4", "c5"}) records.push_back(record("OrderCreated", id, std::string("o") + id));
    world split({.lock_entries = 2, .max_batch_records = 2});
    BOOST_TEST(split.inbox.max_batch_records() == 2u);
    const auto results = split.inbox.deliver_batch(records);
    BOOST_TEST(results.size() == records.size());
    BOOST_TEST(split.store.messages().size() == records.size());
    BOOST_TEST(memory::testing::lock_table_exhausted(split.store) == 0u);

    world whole({.lock_entries = 2});
    BOOST_CHECK_EXCEPTION(whole.inbox.deliver_batch(records), seqinbox::error,
                          [](const seqinbox::error& e) { return e.sqlstate() == "53200"; });
    BOOST_TEST(whole.store.messages().empty());
}
