// The in-memory store's crash model (memory::testing::crash): what a crash restores, and what
// keeping it costs. An unflushed commit must cost what it changed, never a copy of the tables
// (the store became quadratic that way: users' offline suites, the demo and the simulator paid).
#define BOOST_TEST_MODULE memory_crash_model
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/memory/testing.hpp"

// Counts the allocations made while `counting` is set (this test binary only).
namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
}  // namespace

// GCC pairs the replaced operators with the library's when it inlines them: a false mismatch.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace seqinbox;

namespace {

const timestamp t0{};

message_record row(instance_id instance, const claim_key& key, message_state state, std::optional<std::string> value = {}) {
    message_record r;
    r.instance = instance;
    r.type = key.type;
    r.idempotence_id = key.idempotence_id;
    r.state = state;
    if (value) {
        r.payload.emplace();
        r.payload->value = std::move(value);
    }
    return r;
}

/// A committed, flushed instance with one PROCESSED message and its claim.
void settle_context(memory::store& s, const std::string& context) {
    const auto instance = s.create_or_get_instance("S", context, t0, t0);
    auto tx = s.begin();
    const claim_key key{"A", context};
    tx.claim({key, instance.id, t0});
    tx.store_message(row(instance.id, key, message_state::processed));
    tx.commit();
}

/// Allocations made by `step`.
template <class Step>
std::size_t allocations_of(Step step) {
    allocations = 0;
    counting = true;
    step();
    counting = false;
    return allocations.load();
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_unflushed_commit_costs_what_it_changed_not_a_copy_of_the_tables) {
    memory::store s;
    for (int i = 0; i < 2'000; ++i) settle_context(s, "settled-" + std::to_string(i));
    BOOST_TEST(memory::testing::unflushed_commits(s) == 0u);

    const std::size_t creation = allocations_of([&] { s.create_or_get_instance("S", "new", t0, t0); });
    const auto instance = s.find_instance("S", "new")->id;
    auto claim = s.begin();
    claim.claim({{"A", "new"}, instance, t0});
    const std::size_t step_beside =
        allocations_of([&] { s.store_message_beside(claim, row(instance, {"A", "new"}, message_state::processed)); });
    BOOST_TEST(memory::testing::unflushed_commits(s) == 2u);
    claim.commit();

    // Copying 2,000 instances with their messages and claims takes tens of thousands.
    BOOST_TEST(creation < 100u, "allocations of an unflushed instance creation: " << creation);
    BOOST_TEST(step_beside < 100u, "allocations of an unflushed state step: " << step_beside);
}

BOOST_AUTO_TEST_CASE(a_removed_instance_leaves_no_claim_slot_behind) {
    // Keys claimed, keys stored without a claim (the no_claim strategy, old databases, a claim a
    // crash lost), claims rolled back: once housekeeping removed their instances, nothing stays.
    memory::store s;
    const timestamp later = t0 + std::chrono::hours(2);
    for (int i = 0; i < 300; ++i) {
        const std::string context = "ctx-" + std::to_string(i);
        const auto instance = s.create_or_get_instance("S", context, t0, t0 + std::chrono::hours(1));
        auto tx = s.begin();
        if (i % 3 == 0) tx.claim({{"A", context}, instance.id, t0});
        tx.store_message(row(instance.id, {"A", context}, message_state::processed));
        if (i % 3 == 1) tx.claim({{"B", context}, instance.id, t0});
        if (i % 3 == 2) {
            tx.rollback();
            tx = s.begin();
            tx.claim({{"B", context}, instance.id, t0});
            tx.store_message(row(instance.id, {"B", context}, message_state::processed));
        }
        tx.commit();
    }
    BOOST_TEST(memory::testing::claim_slots(s) > 0u);
    scan_position from;
    s.mark_expired(later, std::chrono::seconds(0), 1'000, from);
    scan_position after;
    const auto ids = s.removable_instances(later, 1'000, after);
    BOOST_TEST(ids.size() == 300u);
    BOOST_TEST(s.remove_instances(ids, removal_condition::expired(later), [](const sequence_instance&, std::span<const message_record>) {}) == 300u);
    BOOST_TEST(memory::testing::claim_slots(s) == 0u);
    BOOST_TEST(s.claim_count() == 0u);
}

namespace {

/// The committed state as a text: every instance and message, the derived indexes as a
/// transaction reads them (the types per state, the WAITING rows, the rows by key), and the claims.
std::string describe(memory::store& s, const std::vector<claim_key>& keys) {
    std::ostringstream out;
    for (const auto& i : s.instances()) {
        out << "instance " << i.id << ' ' << i.sequence << '/' << i.context_id << ' ' << static_cast<int>(i.state) << '\n';
        auto tx = s.begin();
        const auto types = tx.message_types(i.id);
        out << "  processed:";
        for (const auto& t : types.processed) out << ' ' << t;
        out << "\n  waiting:";
        for (const auto& m : tx.waiting_messages(i.id, types.waiting)) out << ' ' << m.id << '=' << m.payload->value.value_or("");
        out << '\n';
        tx.rollback();
    }
    for (const auto& m : s.messages())
        out << "message " << m.id << " of " << m.instance << ' ' << m.type << '/' << m.idempotence_id << ' '
            << static_cast<int>(m.state) << ' ' << (m.payload ? m.payload->value.value_or("-") : "none") << '\n';
    out << "claims " << s.claim_count() << ':';
    for (const auto& k : keys) out << ' ' << memory::testing::has_claim(s, k);
    for (const auto& k : keys) {  // the rows found by key: the index of messages by key
        out << "\nkey " << k.type << '/' << k.idempotence_id << ':';
        for (const auto& m : s.messages_with_key(k)) out << ' ' << m.id;
    }
    return out.str();
}

/// Commits a flushed base state, then seven unflushed commits of every kind beside one open claim
/// transaction: instance creations, inserts, and updates of rows committed before (flushed or
/// not). Returns the state before each unflushed commit, then the state after the last. The claim
/// transaction stays open, as a crash finds it (its end would flush its steps beside).
std::vector<std::string> unflushed_story(memory::store& s, memory::store::transaction& claim, const std::vector<claim_key>& keys) {
    std::vector<std::string> states;
    const auto a = s.create_or_get_instance("S", "a", t0, t0).id;
    auto base = s.begin();
    base.claim({keys[0], a, t0});
    base.store_message(row(a, keys[0], message_state::waiting, "a1"));
    base.commit();

    auto unflushed = [&](auto step) {
        states.push_back(describe(s, keys));
        step();
    };
    instance_id b = 0, c = 0;
    unflushed([&] { b = s.create_or_get_instance("S", "b", t0, t0).id; });
    claim.claim({keys[1], b, t0});
    unflushed([&] { s.store_message_beside(claim, row(b, keys[1], message_state::waiting, "b1")); });
    unflushed([&] { s.store_message_beside(claim, row(a, keys[0], message_state::processed)); });
    unflushed([&] { c = s.create_or_get_instance("S", "c", t0, t0).id; });
    unflushed([&] { s.store_message_beside(claim, row(c, keys[2], message_state::failed, "c1")); });
    unflushed([&] { s.store_message_beside(claim, row(c, keys[2], message_state::processed, "c2")); });
    unflushed([&] { s.store_message_beside(claim, row(b, keys[1], message_state::processed)); });
    states.push_back(describe(s, keys));
    BOOST_TEST_REQUIRE(memory::testing::unflushed_commits(s) == states.size() - 1);
    return states;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_crash_restores_exactly_the_state_before_the_first_lost_commit) {
    const std::vector<claim_key> keys{{"A", "a"}, {"B", "b"}, {"C", "c"}};
    for (std::size_t keep = 0; keep <= 8; ++keep) {
        BOOST_TEST_CONTEXT("keep " << keep) {
            memory::store s;
            auto claim = s.begin();
            const auto states = unflushed_story(s, claim, keys);
            memory::testing::crash(s, keep);
            BOOST_TEST(describe(s, keys) == states[std::min(keep, states.size() - 1)]);

            // The restored indexes serve the next deliveries: a new instance and message get ids
            // after the kept ones, and a kept WAITING row is released by an update.
            const auto d = s.create_or_get_instance("S", "d", t0, t0);
            BOOST_TEST(s.instances().back().id == d.id);
            s.store_message(row(d.id, {"D", "d"}, message_state::processed));
            BOOST_TEST(s.messages().back().type == "D");
            s.store_message(row(1, keys[0], message_state::processed));
            auto tx = s.begin();
            BOOST_TEST(tx.message_types(1).waiting.empty());
            BOOST_TEST(tx.message_types(1).processed == std::vector<std::string>{"A"});
        }
    }
}
