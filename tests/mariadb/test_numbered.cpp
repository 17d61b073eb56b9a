// Numbered sequences on the MariaDB store, beyond the conformance cases: the claims' rows carry
// the number, each numbered operation is one round trip, and skip_numbers (kept on the instance's
// lock row) does not wait for a claim queued behind the instance lock.
#define BOOST_TEST_MODULE mariadb numbered
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "mariadb_backend.hpp"

namespace si = seqinbox;
using namespace std::chrono_literals;
using fixture = si::conformance::mariadb_backend;

namespace {

si::timestamp now() { return si::timestamp(std::chrono::seconds(1'800'000'000)); }

si::instance_id instance_of(fixture& f, const std::string& context = "c1") {
    return f.store.create_or_get_instance("S", context, now(), now() + 24h).id;
}

si::message_record numbered(si::instance_id instance, const std::string& id, std::int64_t number, si::message_state state) {
    si::message_record row;
    row.instance = instance;
    row.type = "T";
    row.idempotence_id = id;
    row.state = state;
    row.created_at = row.state_changed_at = now();
    row.number = number;
    return row;
}

std::uint64_t round_trips(fixture& f) { return f.store.statistics().round_trips; }

/// Deadlocks InnoDB broke on the server so far (by rolling a transaction back).
long long deadlocks(fixture& f) {
    std::string name;
    long long count = 0;
    f.inspection() << "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'", soci::into(name), soci::into(count);
    return count;
}

}  // namespace

BOOST_AUTO_TEST_CASE(claimed_rows_carry_their_number) {
    fixture f;
    const auto instance = instance_of(f);
    f.store.store_message(numbered(instance, "a", 5, si::message_state::failed));
    f.store.store_message(numbered(instance, "b", 6, si::message_state::failed));
    auto one = f.store.begin();
    const auto claimed = one.claim({{"T", "a"}, instance, now()});
    BOOST_TEST_REQUIRE(claimed.rows.size() == 1u);
    BOOST_TEST(claimed.rows.front().number.value_or(-1) == 5);
    one.rollback();
    auto batch = f.store.begin();
    const std::vector<si::claim_request> requests{{{"T", "b"}, instance, now()}, {{"T", "a"}, instance, now()}};
    const auto results = batch.claim_batch(requests);
    BOOST_TEST_REQUIRE(results.size() == 2u);
    BOOST_TEST_REQUIRE(results[0].rows.size() == 1u);
    BOOST_TEST(results[0].rows.front().number.value_or(-1) == 6);
    BOOST_TEST(results[1].rows.front().number.value_or(-1) == 5);
}

// The number travels in the statements a write had before: no round trip of its own.
BOOST_AUTO_TEST_CASE(each_numbered_operation_is_one_round_trip) {
    fixture f;
    const auto instance = instance_of(f);
    auto before = round_trips(f);
    f.store.store_message(numbered(instance, "w", 3, si::message_state::waiting));
    BOOST_TEST(round_trips(f) - before == 1u, "a new key in a transaction of its own, as without a number");
    auto tx = f.store.begin();
    tx.lock_instance(instance);
    before = round_trips(f);
    BOOST_TEST(!tx.last_released_number(instance).has_value());
    BOOST_TEST(round_trips(f) - before == 1u);
    before = round_trips(f);
    BOOST_TEST(tx.waiting_numbered(instance, 0, 10).size() == 1u);
    BOOST_TEST(round_trips(f) - before == 1u);
    before = round_trips(f);
    tx.skip_numbers(instance, 2);
    BOOST_TEST(round_trips(f) - before == 1u);
    BOOST_TEST(tx.last_released_number(instance).value_or(-1) == 2);
    tx.commit();
}

// A claim of the instance on another connection holds the sequence_instance row shared (its
// foreign key check) while it waits for the instance lock: skip_numbers and the commit still go
// through without a deadlock (an UPDATE of that row would deadlock with the claim, which InnoDB
// rolls back and the store redoes), and the claim wins afterwards.
BOOST_AUTO_TEST_CASE(skip_numbers_does_not_wait_for_a_claim_queued_behind_the_instance_lock) {
    fixture f;
    const auto instance = instance_of(f);
    const auto deadlocks_before = deadlocks(f);
    auto holder = f.store.begin();
    holder.lock_instance(instance);
    auto claim = std::async(std::launch::async, [&] {
        auto tx = f.store.begin();
        const bool won = tx.claim({{"T", "later"}, instance, now()}).won;
        tx.commit();
        return won;
    });
    BOOST_TEST((claim.wait_for(500ms) == std::future_status::timeout), "the claim waits for the instance lock");
    holder.skip_numbers(instance, 9);
    holder.commit();
    BOOST_TEST(claim.get());
    BOOST_TEST(deadlocks(f) == deadlocks_before);
    BOOST_TEST(f.store.begin().last_released_number(instance).value_or(-1) == 9);
}
