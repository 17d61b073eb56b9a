// The in-memory store reproduces the database semantics the guarantees depend on (docs/guarantees.md, in-memory store).
#define BOOST_TEST_MODULE memory_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <string>
#include <thread>

#include "seqinbox/memory/step_driver.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"

using namespace seqinbox;
using memory::task_status;

namespace {

struct fixture {
    memory::store store;
    sequence_instance instance = store.create_or_get_instance("S", "ctx", {}, {});
    claim_key key{"A", "1"};

    message_record row(message_state state, std::string type = "A", std::string id = "1") const {
        message_record r;
        r.instance = instance.id;
        r.type = std::move(type);
        r.idempotence_id = std::move(id);
        r.state = state;
        return r;
    }
};

template <class Fn>
error_category category_of(Fn&& fn) {
    try {
        fn();
    } catch (const seqinbox::error& e) {
        return e.category();
    }
    BOOST_FAIL("expected seqinbox::error");
    return error_category::internal;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(create_or_get_returns_one_row_per_context, fixture) {
    auto again = store.create_or_get_instance("S", "ctx", {}, {});
    auto other = store.create_or_get_instance("S", "other", {}, {});
    BOOST_TEST(again.id == instance.id);
    BOOST_TEST(other.id != instance.id);
    BOOST_TEST(store.instances().size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(uncommitted_rows_are_invisible_to_other_transactions, fixture) {
    auto writer = store.begin();
    writer.insert_message(row(message_state::processed));
    auto reader = store.begin();
    BOOST_TEST(reader.find_messages(key).empty());
    BOOST_TEST(reader.message_types(instance.id).processed.empty());
    BOOST_TEST(writer.find_messages(key).size() == 1u);  // a transaction sees its own writes
    BOOST_TEST(writer.message_types(instance.id).processed == std::vector<std::string>{"A"});
    writer.commit();
    BOOST_TEST(reader.find_messages(key).size() == 1u);  // read committed
}

BOOST_FIXTURE_TEST_CASE(rolled_back_and_destroyed_transactions_leave_nothing, fixture) {
    {
        auto tx = store.begin();
        tx.claim({key, instance.id, {}});
        tx.insert_message(row(message_state::waiting));
    }  // destroyed without commit
    auto tx = store.begin();
    tx.insert_message(row(message_state::waiting));
    tx.rollback();
    BOOST_TEST(!memory::testing::has_claim(store, key));
    BOOST_TEST(store.messages().empty());
    BOOST_TEST(store.open_transaction_count() == 0u);
}

BOOST_FIXTURE_TEST_CASE(claim_insert_is_one_for_the_first_and_zero_once_committed, fixture) {
    auto first = store.begin();
    BOOST_TEST(first.claim({key, instance.id, {}}).won);
    BOOST_TEST(!first.claim({key, instance.id, {}}).won);  // own uncommitted claim conflicts too
    first.commit();
    auto second = store.begin();
    BOOST_TEST(!second.claim({key, instance.id, {}}).won);
}

BOOST_FIXTURE_TEST_CASE(a_free_thread_waits_for_the_claim_holder_then_resolves, fixture) {
    for (bool holder_commits : {true, false}) {
        claim_key k{"A", holder_commits ? "commit" : "rollback"};
        auto holder = store.begin();
        BOOST_TEST(holder.claim({k, instance.id, {}}).won);
        std::atomic<bool> returned{false};
        auto waiter = std::async(std::launch::async, [&] {
            auto tx = store.begin();
            bool won = tx.claim({k, instance.id, {}}).won;
            returned = true;
            tx.commit();
            return won;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        BOOST_TEST(!returned.load());  // blocked inside the store while the holder is open
        holder_commits ? holder.commit() : holder.rollback();
        BOOST_TEST(waiter.get() == !holder_commits);
    }
}

BOOST_FIXTURE_TEST_CASE(a_free_thread_gives_up_after_the_lock_timeout, fixture) {
    memory::store quick(memory::store_options{std::chrono::milliseconds(20)});
    auto inst = quick.create_or_get_instance("S", "c", {}, {});
    auto holder = quick.begin();
    holder.lock_instance(inst.id);
    auto other = quick.begin();
    BOOST_TEST((category_of([&] { other.lock_instance(inst.id); }) == error_category::retryable));
}

BOOST_FIXTURE_TEST_CASE(instance_lock_serialises_but_does_not_block_inserts, fixture) {
    memory::step_driver driver(store);
    auto holder = store.begin();
    holder.lock_instance(instance.id);
    bool inserted = false;
    auto t = driver.spawn("other", [&] {
        auto tx = store.begin();
        tx.insert_message(row(message_state::waiting, "B"));  // FK key-share: not blocked
        tx.commit();
        inserted = true;
        auto locker = store.begin();
        locker.lock_instance(instance.id);
        locker.commit();
    });
    BOOST_TEST((driver.run_until(t, "instance.lock") == task_status::parked));
    BOOST_TEST(inserted);
    BOOST_TEST((driver.step(t) == task_status::blocked));
    holder.commit();
    BOOST_TEST((driver.finish(t) == task_status::finished));
}

BOOST_FIXTURE_TEST_CASE(a_lost_connection_rolls_back_and_fails_later_calls, fixture) {
    memory::step_driver driver(store);
    auto t = driver.spawn("victim", [&] {
        auto tx = store.begin();
        tx.claim({key, instance.id, {}});
        tx.insert_message(row(message_state::processed));
        tx.commit();
    });
    driver.run_until(t, "commit");
    driver.lose_connection(t);
    BOOST_TEST((driver.finish(t) == task_status::failed));
    try {
        std::rethrow_exception(driver.failure(t));
    } catch (const seqinbox::error& e) {
        BOOST_TEST((e.category() == error_category::connection));
        BOOST_TEST(e.sqlstate() == "57P01");
    }
    BOOST_TEST(!memory::testing::has_claim(store, key));
    BOOST_TEST(store.messages().empty());
    auto fresh = store.begin();  // a new connection works
    BOOST_TEST(fresh.claim({key, instance.id, {}}).won);
}

BOOST_FIXTURE_TEST_CASE(deleting_an_instance_cascades_to_claims_and_messages, fixture) {
    auto other = store.create_or_get_instance("S", "other", {}, {});
    auto tx = store.begin();
    tx.claim({key, instance.id, {}});
    tx.insert_message(row(message_state::waiting));
    tx.claim({{"A", "2"}, other.id, {}});
    tx.commit();
    memory::testing::delete_instance(store, instance.id);
    BOOST_TEST(!memory::testing::has_claim(store, key));
    BOOST_TEST(memory::testing::has_claim(store, {"A", "2"}));
    BOOST_TEST(store.messages().empty());
    BOOST_TEST(!store.find_instance("S", "ctx").has_value());
    auto late = store.begin();  // a reference to the removed instance is a foreign-key error
    BOOST_TEST((category_of([&] { late.claim({{"A", "3"}, instance.id, {}}); }) == error_category::retryable));
}

BOOST_FIXTURE_TEST_CASE(rollback_to_savepoint_undoes_only_later_writes, fixture) {
    auto tx = store.begin();
    tx.put("kept", "1");
    auto point = tx.savepoint();
    tx.put("undone", "2");
    tx.claim({key, instance.id, {}});
    tx.rollback_to(point);
    tx.commit();
    BOOST_TEST(memory::testing::kv_get(store, "kept").value_or("") == "1");
    BOOST_TEST(!memory::testing::kv_get(store, "undone").has_value());
    BOOST_TEST(!memory::testing::has_claim(store, key));
}

BOOST_FIXTURE_TEST_CASE(waiting_messages_are_filtered_by_type_and_ordered, fixture) {
    auto tx = store.begin();
    auto b1 = tx.insert_message(row(message_state::waiting, "B", "1"));
    tx.insert_message(row(message_state::waiting, "C", "1"));
    auto b2 = tx.insert_message(row(message_state::waiting, "B", "2"));
    tx.commit();
    auto reader = store.begin();
    std::vector<std::string> types{"B"};
    auto rows = reader.waiting_messages(instance.id, types);
    BOOST_TEST_REQUIRE(rows.size() == 2u);
    BOOST_TEST(rows[0].id == b1);
    BOOST_TEST(rows[1].id == b2);
    reader.update_message_state(b1, message_state::processed, {});
    BOOST_TEST(reader.waiting_messages(instance.id, types).size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(an_ended_transaction_refuses_further_use, fixture) {
    auto tx = store.begin();
    tx.commit();
    BOOST_TEST((category_of([&] { tx.find_messages(key); }) == error_category::misuse));
}

// ---- PostgreSQL's lock table (store_options::lock_entries) ----

BOOST_AUTO_TEST_CASE(max_batch_records_halves_when_listeners_join_and_is_unlimited_by_default) {
    memory::store unlimited;
    BOOST_TEST(unlimited.max_batch_records(false) == std::numeric_limits<std::size_t>::max());
    memory::store limited({.max_batch_records = 3});
    BOOST_TEST(limited.max_batch_records(false) == 3u);
    BOOST_TEST(limited.max_batch_records(true) == 1u);
}

namespace {

bool out_of_shared_memory(const seqinbox::error& e) {
    return e.category() == error_category::retryable && e.sqlstate() == "53200" &&
           std::string(e.what()).find("out of shared memory") != std::string::npos;
}

bool aborted(const seqinbox::error& e) { return e.sqlstate() == "25P02"; }

}  // namespace

// A stored key and a savepoint take an entry each; the one over the share fails and aborts the
// transaction until it rolls back to a savepoint.
BOOST_AUTO_TEST_CASE(a_transaction_over_its_lock_entries_fails_with_53200_and_is_aborted) {
    memory::store store({.lock_entries = 2});
    const auto instance = store.create_or_get_instance("S", "ctx", {}, {});
    const auto row = [&](std::string id) {
        return message_record{0, instance.id, "A", std::move(id), message_state::processed, {}, {}, std::nullopt};
    };
    auto tx = store.begin();
    tx.store_message(row("1"));
    tx.store_message(row("1"));  // the same key: no new entry
    const auto point = tx.savepoint();
    BOOST_CHECK_EXCEPTION(tx.store_message(row("2")), seqinbox::error, out_of_shared_memory);
    BOOST_CHECK_EXCEPTION(tx.find_messages({"A", "1"}), seqinbox::error, aborted);
    tx.rollback_to(point);
    BOOST_TEST(tx.find_messages({"A", "1"}).size() == 1u);
    tx.commit();
    BOOST_TEST(store.messages().size() == 1u);
    BOOST_TEST(memory::testing::lock_table_exhausted(store) == 1u);
}

BOOST_AUTO_TEST_CASE(an_armed_lock_table_fault_fails_the_next_commit_and_nothing_is_saved) {
    memory::store store;
    const auto instance = store.create_or_get_instance("S", "ctx", {}, {});
    memory::step_driver driver(store);
    const auto task = driver.spawn("t", [&] {
        auto tx = store.begin();
        tx.store_message({0, instance.id, "A", "1", message_state::processed, {}, {}, std::nullopt});
        tx.commit();
    });
    driver.run_until(task, "commit");
    BOOST_TEST(driver.exhaust_lock_table(task) == 1u);
    BOOST_TEST((driver.finish(task) == task_status::failed));
    BOOST_CHECK_EXCEPTION(std::rethrow_exception(driver.failure(task)), seqinbox::error, out_of_shared_memory);
    BOOST_TEST(store.messages().empty());
    BOOST_TEST(store.open_transaction_count() == 0u);
    BOOST_TEST(memory::testing::lock_table_exhausted(store) == 0u, "a planted fault is not the budget");
}
