// The PostgreSQL semantics the insert-first claim relies on (seed, "Atomic claim operation"),
// checked directly on the migrated schema with two sessions: the losing insert waits inside
// PostgreSQL and then reports 0 after the holder commits, 1 after it rolls back or its backend
// dies; claims go with their instance; the instance lock must be FOR NO KEY UPDATE.
#define BOOST_TEST_MODULE seqinbox postgresql claim table
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "pg_test_support.hpp"

namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;

namespace {

/// A migrated database with one sequence instance, and sessions on it.
struct claim_fixture {
    claim_fixture() : conninfo(pg_server::shared().create_database()) {
        pg::migrate(conninfo);
        soci::session s(soci::postgresql, conninfo);
        instance = seqinbox::test::create_instance(s, "orders", "o-1");
    }

    std::string conninfo;
    long long instance = 0;
};

/// The seed's claim statement; its affected-row count decides.
long long claim(soci::session& session, const std::string& type, const std::string& id, long long instance) {
    soci::statement st = (session.prepare << "INSERT INTO sequential_inbox_idempotence"
                                             " (message_type, idempotence_id, sequence_instance_id, created_at)"
                                             " VALUES (:t, :i, :s, now())"
                                             " ON CONFLICT (message_type, idempotence_id) DO NOTHING",
                          soci::use(type), soci::use(id), soci::use(instance));
    st.execute(true);
    return st.get_affected_rows();
}

int backend_pid(soci::session& session) {
    int pid = 0;
    session << "SELECT pg_backend_pid()", soci::into(pid);
    return pid;
}

/// Waits until backend `pid` waits for a lock: proves the contender is blocked in PostgreSQL
/// (not merely slow) before the holder decides.
void wait_until_blocked(const std::string& conninfo, int pid) {
    soci::session observer(soci::postgresql, conninfo);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (count(observer, "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " + std::to_string(pid)) == 0) {
        BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the contender never waited for a lock");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

/// The contender: its own session and thread, one claim in one transaction, committed.
struct contender {
    explicit contender(const claim_fixture& f) : session(soci::postgresql, f.conninfo), pid(backend_pid(session)) {
        result = std::async(std::launch::async, [this, instance = f.instance] {
            soci::transaction t(session);
            const long long rows = claim(session, "OrderCreated", "m-1", instance);
            t.commit();
            return rows;
        });
    }

    soci::session session;
    int pid;
    std::future<long long> result;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(claim_table, claim_fixture)

BOOST_AUTO_TEST_CASE(first_claim_wins_and_a_committed_claim_is_final) {
    soci::session a(soci::postgresql, conninfo);
    BOOST_TEST(claim(a, "OrderCreated", "m-1", instance) == 1);
    BOOST_TEST(claim(a, "OrderCreated", "m-1", instance) == 0);
    BOOST_TEST(claim(a, "OrderCreated", "m-2", instance) == 1);  // another id
    BOOST_TEST(claim(a, "OrderShipped", "m-1", instance) == 1);  // another type
}

BOOST_AUTO_TEST_CASE(loser_waits_then_gets_0_when_the_holder_commits) {
    soci::session holder(soci::postgresql, conninfo);
    soci::transaction t(holder);
    BOOST_TEST(claim(holder, "OrderCreated", "m-1", instance) == 1);
    contender loser(*this);
    wait_until_blocked(conninfo, loser.pid);
    t.commit();
    BOOST_TEST(loser.result.get() == 0);
}

BOOST_AUTO_TEST_CASE(loser_takes_over_when_the_holder_rolls_back) {
    soci::session holder(soci::postgresql, conninfo);
    soci::transaction t(holder);
    BOOST_TEST(claim(holder, "OrderCreated", "m-1", instance) == 1);
    contender loser(*this);
    wait_until_blocked(conninfo, loser.pid);
    t.rollback();
    BOOST_TEST(loser.result.get() == 1);
}

BOOST_AUTO_TEST_CASE(loser_takes_over_when_the_holder_backend_dies) {
    soci::session holder(soci::postgresql, conninfo);
    holder.begin();
    BOOST_TEST(claim(holder, "OrderCreated", "m-1", instance) == 1);
    contender loser(*this);
    wait_until_blocked(conninfo, loser.pid);
    {
        soci::session admin(soci::postgresql, conninfo);
        int terminated = 0;
        admin << "SELECT pg_terminate_backend(:pid)::int", soci::use(backend_pid(holder)), soci::into(terminated);
        BOOST_TEST(terminated == 1);
    }
    BOOST_TEST(loser.result.get() == 1);
    // the killed side learns it on its next statement: a connection error, not a silent success
    try {
        claim(holder, "OrderCreated", "m-3", instance);
        BOOST_FAIL("a statement on a terminated backend succeeded");
    } catch (const soci::postgresql_soci_error& e) {
        BOOST_TEST((e.get_error_category() == soci::soci_error::connection_error ||
                    e.sqlstate().starts_with("57P01") || e.sqlstate().starts_with("08")),
                   e.sqlstate());
    } catch (const soci::soci_error&) {
        // SOCI reports some lost connections without a PostgreSQL error object
    }
    soci::session check(soci::postgresql, conninfo);
    BOOST_TEST(count(check, "SELECT count(*) FROM sequential_inbox_idempotence") == 1);
}

BOOST_AUTO_TEST_CASE(claims_are_deleted_with_their_instance) {
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(claim(s, "OrderCreated", "m-1", instance) == 1);
    BOOST_TEST(claim(s, "OrderShipped", "m-1", instance) == 1);
    const long long other = seqinbox::test::create_instance(s, "orders", "o-2");
    BOOST_TEST(claim(s, "OrderCreated", "m-2", other) == 1);
    s << "DELETE FROM sequence_instance WHERE id = :id", soci::use(instance);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence") == 1);
    // the retention boundary: after housekeeping the same message can be claimed again
    BOOST_TEST(claim(s, "OrderCreated", "m-1", other) == 1);
}

BOOST_AUTO_TEST_CASE(instance_lock_for_no_key_update_lets_referencing_inserts_through) {
    soci::session locker(soci::postgresql, conninfo);
    soci::session child(soci::postgresql, conninfo);
    child << "SET lock_timeout = '2s'";  // a blocked insert fails instead of hanging the test
    {
        soci::transaction t(locker);
        long long id = 0;
        locker << "SELECT id FROM sequence_instance WHERE id = :id FOR NO KEY UPDATE", soci::use(instance), soci::into(id);
        // the foreign-key check takes FOR KEY SHARE, compatible with FOR NO KEY UPDATE
        BOOST_TEST(claim(child, "OrderCreated", "m-1", instance) == 1);
        t.rollback();
    }
    // the contrast: FOR UPDATE blocks the same insert (the self-deadlock trap of the notes)
    child << "SET lock_timeout = '200ms'";
    soci::transaction t(locker);
    long long id = 0;
    locker << "SELECT id FROM sequence_instance WHERE id = :id FOR UPDATE", soci::use(instance), soci::into(id);
    try {
        claim(child, "OrderCreated", "m-2", instance);
        BOOST_FAIL("an insert referencing a FOR UPDATE locked instance went through");
    } catch (const soci::postgresql_soci_error& e) {
        BOOST_TEST(e.sqlstate() == "55P03");
    }
}

BOOST_AUTO_TEST_SUITE_END()
