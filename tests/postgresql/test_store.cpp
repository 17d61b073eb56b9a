// seqinbox::postgresql::store below the engine: session settings, the pool (exhaustion, lost
// connections replaced), deferred writes and what commit() reports, savepoints, the round trips
// of a steady-state delivery, and the instance cache (eviction, instances removed meanwhile).
#define BOOST_TEST_MODULE seqinbox postgresql store
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

struct store_fixture {
    store_fixture() : conninfo(pg_server::shared().create_database()) { pg::migrate(conninfo); }

    pg::store_options options(std::size_t pool_size = 4) const {
        pg::store_options o;
        o.conninfo = conninfo;
        o.pool_size = pool_size;
        return o;
    }

    si::sequence_instance instance(pg::store& store, const std::string& context_id = "o-1") const {
        const auto now = std::chrono::system_clock::now();
        return store.create_or_get_instance("OrderSequence", context_id, now, now + 24h);
    }

    si::message_record row(si::instance_id instance, const std::string& id) const {
        si::message_record r;
        r.instance = instance;
        r.type = "OrderCreated";
        r.idempotence_id = id;
        r.state = si::message_state::processed;
        return r;
    }

    long long rows(const std::string& where = "TRUE") const {
        soci::session s(soci::postgresql, conninfo);
        return count(s, "SELECT count(*) FROM sequenced_message WHERE " + where);
    }

    std::string setting(pg::store::transaction& tx, const std::string& name) const {
        std::string value;
        tx.session() << "SELECT current_setting(:n)", soci::use(name), soci::into(value);
        return value;
    }

    std::string conninfo;
};

std::uint64_t round_trips(const pg::store& store) { return store.statistics().round_trips; }

void terminate_backend_of(pg::store::transaction& tx, const std::string& conninfo) {
    int pid = 0;
    tx.session() << "SELECT pg_backend_pid()", soci::into(pid);
    soci::session admin(soci::postgresql, conninfo);
    int done = 0;
    admin << "SELECT CAST(pg_terminate_backend(:pid) AS integer)", soci::use(pid), soci::into(done);
    BOOST_TEST_REQUIRE(done == 1);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(postgresql_store, store_fixture)

BOOST_AUTO_TEST_CASE(a_uri_connection_string_works_like_key_value) {
    const auto dbname = conninfo.substr(conninfo.find("dbname=") + 7, conninfo.find(' ', conninfo.find("dbname=")) - conninfo.find("dbname=") - 7);
    auto o = options();
    o.conninfo = "postgresql://postgres@127.0.0.1:" + std::to_string(pg_server::shared().port()) + "/" + dbname +
                 "?application_name=seqinbox%27test";
    pg::store store(o);
    auto tx = store.begin();
    BOOST_TEST(setting(tx, "application_name") == "seqinbox'test");
    BOOST_TEST(pg::migrate(o.conninfo).applied.empty());

    o.conninfo += "%20with%20spaces";  // SOCI 4.0 splits values at whitespace: refused clearly
    try {
        pg::store refused(o);
        BOOST_FAIL("a value with whitespace was accepted");
    } catch (const si::error& e) {
        BOOST_TEST(std::string(e.what()).find("'application_name'") != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("contains whitespace") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(connections_carry_the_configured_timeouts) {
    auto o = options();
    o.idle_in_transaction_timeout = 42s;
    o.lock_timeout = 1500ms;
    pg::store store(o);
    auto tx = store.begin();
    BOOST_TEST(setting(tx, "idle_in_transaction_session_timeout") == "42s");
    BOOST_TEST(setting(tx, "lock_timeout") == "1500ms");
    BOOST_TEST(setting(tx, "TimeZone") == "UTC");

    o.idle_in_transaction_timeout = -1s;  // keep the server's setting
    pg::store defaults(o);
    auto other = defaults.begin();
    BOOST_TEST(setting(other, "idle_in_transaction_session_timeout") == "0");
}

BOOST_AUTO_TEST_CASE(an_abandoned_claim_transaction_ends_after_the_idle_timeout) {
    auto o = options();
    o.idle_in_transaction_timeout = 1s;
    pg::store store(o);
    const auto inst = instance(store);
    auto stuck = store.begin();
    BOOST_TEST(stuck.claim({{"OrderCreated", "m-1"}, inst.id, {}}).won);
    std::this_thread::sleep_for(1500ms);  // the server ends the idle transaction on its own

    auto next = store.begin();
    BOOST_TEST(next.claim({{"OrderCreated", "m-1"}, inst.id, {}}).won);  // the claim was released
    next.commit();
    try {
        stuck.find_messages({"OrderCreated", "m-1"});
        BOOST_FAIL("a statement on a timed-out session succeeded");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "connection", e.what());
    }
    BOOST_TEST(!stuck.active());
}

BOOST_AUTO_TEST_CASE(a_lost_connection_is_reported_and_replaced) {
    pg::store store(options(1));
    const auto inst = instance(store);
    {
        auto tx = store.begin();
        BOOST_TEST(tx.claim({{"OrderCreated", "m-1"}, inst.id, {}}).won);
        terminate_backend_of(tx, conninfo);
        try {
            tx.find_messages({"OrderCreated", "m-1"});
            BOOST_FAIL("a statement on a terminated backend succeeded");
        } catch (const si::error& e) {
            BOOST_TEST(to_string(e.category()) == "connection");
            BOOST_TEST(std::string(e.what()).find("connection to PostgreSQL was lost") != std::string::npos, e.what());
        }
        BOOST_TEST(!tx.active());
    }
    BOOST_TEST(store.statistics().connections_replaced == 1u);
    auto again = store.begin();  // the pool of one opened a fresh connection
    BOOST_TEST(again.claim({{"OrderCreated", "m-1"}, inst.id, {}}).won);
    again.commit();
    BOOST_TEST(store.statistics().connections_opened == 2u);
}

BOOST_AUTO_TEST_CASE(an_exhausted_pool_gives_a_retryable_error_naming_the_setting) {
    auto o = options(1);
    o.acquire_timeout = 100ms;
    pg::store store(o);
    auto held = store.begin();
    try {
        auto second = store.begin();
        BOOST_FAIL("begin() succeeded with every connection leased");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "retryable");
        BOOST_TEST(std::string(e.what()).find("pool_size") != std::string::npos, e.what());
    }
    held.rollback();  // ending a transaction returns its connection at once
    auto third = store.begin();
    BOOST_TEST(third.active());
}

BOOST_AUTO_TEST_CASE(a_lone_write_commits_in_one_round_trip) {
    pg::store store(options());
    const auto inst = instance(store);
    { auto warm = store.begin(); warm.insert_message(row(inst.id, "warm-up")); warm.commit(); }
    const auto before = round_trips(store);
    auto tx = store.begin();
    tx.insert_message(row(inst.id, "m-1"));
    BOOST_TEST(rows("idempotence_id = 'm-1'") == 0);  // deferred until commit
    tx.commit();
    BOOST_TEST(round_trips(store) - before == 1u);
    BOOST_TEST(rows("idempotence_id = 'm-1'") == 1);
}

// A transaction's state changes go as one statement with its commit, whatever their number; a
// row changed twice keeps its last state, as when the changes went one by one.
BOOST_AUTO_TEST_CASE(state_changes_go_together_and_the_last_of_a_row_wins) {
    pg::store store(options());
    const auto inst = instance(store);
    {
        auto tx = store.begin();
        for (int k = 0; k < 20; ++k) tx.insert_message(row(inst.id, "m-" + std::to_string(k)));
        tx.commit();
    }
    std::vector<si::message_id> ids;
    {
        auto tx = store.begin();
        for (int k = 0; k < 20; ++k) ids.push_back(tx.find_messages({"OrderCreated", "m-" + std::to_string(k)}).at(0).id);
        tx.commit();
    }
    const auto before = round_trips(store);
    auto tx = store.begin();
    const auto now = std::chrono::system_clock::now();
    for (auto id : ids) tx.update_message_state(id, si::message_state::processed, now);
    tx.update_message_state(ids[3], si::message_state::failed, now);
    tx.update_message_state(ids[7], si::message_state::failed, now);
    tx.update_message_state(ids[7], si::message_state::waiting, now);
    tx.commit();
    BOOST_TEST(round_trips(store) - before == 1u);
    BOOST_TEST(rows("state = 'PROCESSED'") == 18);
    BOOST_TEST(rows("state = 'FAILED' AND idempotence_id = 'm-3'") == 1);
    BOOST_TEST(rows("state = 'WAITING' AND idempotence_id = 'm-7'") == 1);
}

BOOST_AUTO_TEST_CASE(a_failing_deferred_write_fails_the_commit) {
    pg::store store(options());
    auto tx = store.begin();
    tx.insert_message(row(999'999, "m-1"));  // no such instance: the foreign key rejects it
    BOOST_CHECK_THROW(tx.commit(), si::error);
    BOOST_TEST(rows() == 0);

    const auto inst = instance(store);
    auto two = store.begin();
    two.insert_message(row(inst.id, "m-2"));
    two.insert_message(row(999'999, "m-3"));
    BOOST_CHECK_THROW(two.commit(), si::error);
    BOOST_TEST(rows() == 0);  // both writes went in one transaction
}

BOOST_AUTO_TEST_CASE(commit_after_a_failed_statement_of_the_listener_throws) {
    pg::store store(options());
    const auto inst = instance(store);
    auto tx = store.begin();
    BOOST_TEST(tx.claim({{"OrderCreated", "m-1"}, inst.id, {}}).won);
    BOOST_CHECK_THROW(tx.session() << "SELECT no_such_column FROM sequence_instance", soci::soci_error);
    tx.insert_message(row(inst.id, "m-1"));
    try {
        tx.commit();
        BOOST_FAIL("commit hid the rollback PostgreSQL made");
    } catch (const si::error& e) {
        BOOST_TEST(std::string(e.what()).find("nothing was saved") != std::string::npos, e.what());
    }
    BOOST_TEST(rows() == 0);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence") == 0);
}

BOOST_AUTO_TEST_CASE(rollback_to_a_savepoint_drops_later_writes_sent_or_not) {
    pg::store store(options());
    const auto inst = instance(store);
    auto tx = store.begin();
    tx.insert_message(row(inst.id, "kept"));
    const auto point = tx.savepoint();
    tx.insert_message(row(inst.id, "sent"));
    BOOST_TEST(tx.find_messages({"OrderCreated", "sent"}).size() == 1u);  // the read sent it
    tx.insert_message(row(inst.id, "pending"));
    tx.rollback_to(point);
    tx.commit();
    BOOST_TEST(rows("idempotence_id = 'kept'") == 1);
    BOOST_TEST(rows("idempotence_id IN ('sent', 'pending')") == 0);
}

/// An inbox on `store` with a listener for every declared type.
struct order_inbox {
    explicit order_inbox(pg::store& store)
        : inbox(store, source, sink, si::testing::order_declarations()) {
        for (const auto& m : inbox.declared().sequences.front().messages) inbox.on(m.qualified_type(), [](auto&&, auto&&) {});
    }

    std::string deliver(const std::string& type, const std::string& id, const std::string& context_id) {
        return std::string(to_string(inbox.deliver(si::testing::record(type, id, context_id)).outcome));
    }

    si::memory::source source;
    si::memory::error_sink sink;
    si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink> inbox;
};

BOOST_AUTO_TEST_CASE(a_direct_delivery_costs_three_round_trips_on_a_known_instance_closing_included) {
    pg::store store(options());
    order_inbox orders(store);
    BOOST_TEST(orders.deliver("OrderCreated", "warm", "o-0") == "processed");

    auto before = round_trips(store);
    BOOST_TEST(orders.deliver("OrderCreated", "c1", "o-1") == "processed");
    // create-or-get instance (a new context); BEGIN, claim, find, lock and types; PROCESSED (alone); COMMIT
    BOOST_TEST(round_trips(store) - before == 4u);

    before = round_trips(store);
    BOOST_TEST(orders.deliver("OrderValidated", "v1", "o-1") == "processed");
    BOOST_TEST(round_trips(store) - before == 3u);  // the instance id came from the cache

    // The last type of an instance also closes it: the UPDATE travels with COMMIT.
    std::size_t last = 0;
    for (const auto& type : {"OrderPrepared", "OrderExpedited", "OrderShipped"}) {
        last = round_trips(store);
        BOOST_TEST(orders.deliver(type, std::string(type) + "-1", "o-1") == "processed");
    }
    BOOST_TEST(round_trips(store) - last == 3u);
    BOOST_TEST(rows("state = 'PROCESSED'") == 6);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED' AND closed_at IS NOT NULL") == 1);
}

// The commits that precede the claim transaction's skip the wait for their WAL flush: the
// creation of an instance and the state step beside the claim transaction. The claim
// transaction's commit writes WAL after theirs and waits, so it costs no round trip more; one
// that rolls back flushes with a statement of its own. The setting ends with each statement.
BOOST_AUTO_TEST_CASE(commits_before_the_claim_transactions_commit_skip_the_wal_flush_wait) {
    auto o = options(2);
    o.conninfo += " options=-csynchronous_commit=on";  // the test server runs with it off
    pg::store store(o);
    order_inbox orders(store);
    const auto unflushed = [&] { return store.statistics().unflushed_commits; };
    for (const auto& type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
        BOOST_TEST_REQUIRE(orders.deliver(type, std::string(type) + "-1", "o-1") == "processed");
    BOOST_TEST(unflushed() == 6u);  // the instance and five state steps, the closing one's included

    const auto inst = instance(store, "o-2");
    BOOST_TEST(unflushed() == 7u);
    BOOST_TEST(instance(store, "o-2").id == inst.id);  // found (in the cache): nothing committed
    BOOST_TEST(unflushed() == 7u);
    const auto now = std::chrono::system_clock::now();
    const auto claim_with_step_beside = [&](const std::string& id) {
        auto t1 = store.begin();
        BOOST_TEST_REQUIRE(t1.claim({{"OrderCreated", id}, inst.id, now}).won);
        BOOST_TEST((store.store_message_beside(t1, row(inst.id, id)) == si::stored_as::inserted));
        return t1;
    };
    auto committed = claim_with_step_beside("c-1");
    auto before = round_trips(store);
    committed.commit();
    BOOST_TEST(round_trips(store) - before == 1u);  // COMMIT alone

    auto rolled_back = claim_with_step_beside("r-1");
    before = round_trips(store);
    rolled_back.rollback();
    BOOST_TEST(round_trips(store) - before == 2u);  // ROLLBACK, then the flush
    BOOST_TEST(rows("idempotence_id = 'r-1'") == 1);  // the step stays
    BOOST_TEST(unflushed() == 9u);
    auto without_step = store.begin();
    BOOST_TEST_REQUIRE(without_step.claim({{"OrderCreated", "r-2"}, inst.id, now}).won);
    before = round_trips(store);
    without_step.rollback();
    BOOST_TEST(round_trips(store) - before == 1u);

    auto lost = claim_with_step_beside("l-1");  // its connection dies: the flush takes another
    terminate_backend_of(lost, o.conninfo);
    BOOST_CHECK_NO_THROW(lost.rollback());
    BOOST_TEST(rows("idempotence_id = 'l-1'") == 1);
    {
        auto first = store.begin();
        auto second = store.begin();  // both connections of the pool
        BOOST_TEST(setting(first, "synchronous_commit") == "on");
        BOOST_TEST(setting(second, "synchronous_commit") == "on");
    }

    o.flush_every_commit = true;
    pg::store flushing(o);
    order_inbox more(flushing);
    BOOST_TEST(more.deliver("OrderCreated", "c-3", "o-3") == "processed");
    BOOST_TEST(flushing.statistics().unflushed_commits == 0u);
}

BOOST_AUTO_TEST_CASE(create_or_get_answers_a_known_instance_without_a_round_trip) {
    pg::store store(options());
    const auto first = instance(store, "o-1");
    const auto before = round_trips(store);
    const auto again = instance(store, "o-1");
    BOOST_TEST(round_trips(store) - before == 0u);
    BOOST_TEST(again.id == first.id);
    BOOST_TEST(again.context_id == "o-1");
    BOOST_TEST(instance(store, "o-2").id != first.id);
    BOOST_TEST(round_trips(store) - before == 1u);
}

BOOST_AUTO_TEST_CASE(a_cache_of_size_zero_reads_every_time) {
    auto o = options();
    o.instance_cache_size = 0;
    pg::store store(o);
    const auto first = instance(store, "o-1");
    const auto before = round_trips(store);
    BOOST_TEST(instance(store, "o-1").id == first.id);
    BOOST_TEST(round_trips(store) - before == 1u);
}

BOOST_AUTO_TEST_CASE(the_least_recently_used_instance_leaves_a_full_cache) {
    auto o = options();
    o.instance_cache_size = 2;
    pg::store store(o);
    instance(store, "o-1");
    instance(store, "o-2");
    instance(store, "o-1");  // o-2 is now the least recently used
    instance(store, "o-3");
    auto before = round_trips(store);
    instance(store, "o-1");
    instance(store, "o-3");
    BOOST_TEST(round_trips(store) - before == 0u);
    before = round_trips(store);
    instance(store, "o-2");
    BOOST_TEST(round_trips(store) - before == 1u);
}

namespace {

/// Removes the instance (sequence OrderSequence, `context_id`) the way another process's
/// housekeeping would: through a store of its own.
void remove_elsewhere(const store_fixture& f, const std::string& context_id) {
    pg::store other(f.options(2));
    const auto doomed = f.instance(other, context_id);
    seqinbox::test::mark_due_for_removal(f.conninfo, doomed.id);
    BOOST_TEST_REQUIRE(other.remove_instance(doomed.id, si::removal_condition::expired(std::chrono::system_clock::now()),
                                             [](const si::sequence_instance&, std::span<const si::message_record>) {}));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_claim_on_an_instance_removed_elsewhere_is_retryable_and_forgets_it) {
    pg::store store(options());
    const auto cached = instance(store, "o-1");
    remove_elsewhere(*this, "o-1");
    auto tx = store.begin();
    try {
        tx.claim({{"OrderCreated", "m-1"}, cached.id, {}});
        BOOST_FAIL("a claim on a removed instance succeeded");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "retryable");
        BOOST_TEST(e.sqlstate() == "23503");
        BOOST_TEST(std::string(e.what()).find("sequence instance " + std::to_string(cached.id) + " no longer exists") != std::string::npos, e.what());
    }
    tx.rollback();
    const auto fresh = instance(store, "o-1");
    BOOST_TEST(fresh.id != cached.id);
    auto retry = store.begin();
    BOOST_TEST(retry.claim({{"OrderCreated", "m-1"}, fresh.id, {}}).won);
    retry.commit();
}

BOOST_AUTO_TEST_CASE(locking_an_instance_removed_elsewhere_forgets_it) {
    pg::store store(options());
    const auto cached = instance(store, "o-1");
    remove_elsewhere(*this, "o-1");
    {
        auto tx = store.begin();
        BOOST_CHECK_THROW(tx.lock_instance(cached.id), si::error);
    }
    BOOST_TEST(instance(store, "o-1").id != cached.id);
}

BOOST_AUTO_TEST_CASE(a_delivery_to_an_instance_removed_elsewhere_claims_again_in_a_new_one) {
    pg::store store(options());
    order_inbox orders(store);
    BOOST_TEST(orders.deliver("OrderCreated", "c1", "o-1") == "processed");
    remove_elsewhere(*this, "o-1");
    BOOST_TEST(orders.deliver("OrderValidated", "v1", "o-1") == "buffered");  // a new instance: OrderCreated is gone with the old
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance WHERE context_id = 'o-1'") == 1);
    BOOST_TEST(rows("idempotence_id = 'v1' AND state = 'WAITING'") == 1);
}

/// What a server crash that lost an unflushed instance creation leaves behind: the row is gone and
/// the id sequence's advance with it, so the next creation reuses the id.
void lose_in_a_crash(const store_fixture& f, const si::sequence_instance& lost) {
    soci::session s(soci::postgresql, f.conninfo);
    const long long id = lost.id;
    s << "DELETE FROM sequence_instance WHERE id = :id", soci::use(id);
    s << "SELECT setval(pg_get_serial_sequence('sequence_instance', 'id'), :id, false)", soci::use(id);
}

BOOST_AUTO_TEST_CASE(a_cached_instance_id_reused_after_a_crash_does_not_take_another_contexts_messages) {
    pg::store p1(options());
    order_inbox orders(p1);
    const auto lost = instance(p1, "o-A");  // P1 caches o-A -> id
    lose_in_a_crash(*this, lost);
    pg::store p2(options());
    order_inbox others(p2);
    BOOST_TEST_REQUIRE(others.deliver("OrderCreated", "created-B", "o-B") == "processed");
    BOOST_TEST_REQUIRE(instance(p2, "o-B").id == lost.id);

    // o-A has no OrderCreated: its OrderValidated waits, in an instance of o-A.
    BOOST_TEST(orders.deliver("OrderValidated", "validated-A", "o-A") == "buffered");
    BOOST_TEST(rows("idempotence_id = 'validated-A' AND sequence_instance_id IN (SELECT id FROM sequence_instance WHERE context_id = 'o-A')") == 1);
    BOOST_TEST(rows("sequence_instance_id = " + std::to_string(lost.id)) == 1);  // o-B's own OrderCreated only
    BOOST_TEST(instance(p1, "o-A").id != lost.id);
}

BOOST_AUTO_TEST_CASE(a_lost_connection_clears_the_instance_cache) {
    pg::store store(options());
    const auto cached = instance(store, "o-1");
    {
        auto tx = store.begin();
        terminate_backend_of(tx, conninfo);
        BOOST_CHECK_THROW(tx.lock_instance(cached.id), si::error);
    }
    const auto before = round_trips(store);
    BOOST_TEST(instance(store, "o-1").id == cached.id);
    BOOST_TEST(round_trips(store) - before > 0u);  // read afresh, not from the cache: the server may have lost it
}

BOOST_AUTO_TEST_CASE(housekeeping_in_this_store_forgets_the_removed_instance) {
    pg::store store(options());
    const auto removed = instance(store, "o-1");
    seqinbox::test::mark_due_for_removal(conninfo, removed.id);
    BOOST_TEST_REQUIRE(store.remove_instance(removed.id, si::removal_condition::expired(std::chrono::system_clock::now()),
                                             [](const si::sequence_instance&, std::span<const si::message_record>) {}));
    const auto before = round_trips(store);
    BOOST_TEST(instance(store, "o-1").id != removed.id);
    BOOST_TEST(round_trips(store) - before == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
