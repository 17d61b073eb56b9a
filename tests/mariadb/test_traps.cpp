// The InnoDB behaviours the MariaDB store is built around (issue 37's traps), each shown on the
// store itself and, where the trap is a server behaviour, on a plain session beside it: the claim
// waits for a concurrent holder of its key and then loses or wins; reads see what a lock holder
// committed; a state step on a second connection does not wait for the claim transaction's
// instance lock; and the error categories of deadlocks, lock wait timeouts and killed connections.
#define BOOST_TEST_MODULE mariadb traps
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <utility>
#include <ostream>
#include <string>
#include <thread>

#include "mariadb_backend.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox {

// So that BOOST_TEST prints what it compares.
inline std::ostream& operator<<(std::ostream& out, error_category c) { return out << to_string(c); }
inline std::ostream& operator<<(std::ostream& out, stored_as s) { return out << static_cast<int>(s); }
inline std::ostream& operator<<(std::ostream& out, instance_state s) { return out << to_string(s); }

}  // namespace seqinbox

namespace si = seqinbox;
using namespace std::chrono_literals;
using fixture = si::conformance::mariadb_backend;

namespace {

si::timestamp now() { return si::timestamp(std::chrono::seconds(1'800'000'000)); }

si::instance_id instance_of(fixture& f, const std::string& context = "c1") {
    return f.store.create_or_get_instance("S", context, now(), now() + 24h).id;
}

si::claim_request request(si::instance_id instance, const std::string& id = "k1", const std::string& type = "T") {
    return {{type, id}, instance, now()};
}

si::message_record row_of(si::instance_id instance, const std::string& type, const std::string& id, si::message_state state) {
    si::message_record row;
    row.instance = instance;
    row.type = type;
    row.idempotence_id = id;
    row.state = state;
    row.created_at = row.state_changed_at = now();
    return row;
}

/// Whether `future` is still waiting after `wait`.
template <class T>
bool still_waiting(std::future<T>& future, std::chrono::milliseconds wait = 500ms) {
    return future.wait_for(wait) == std::future_status::timeout;
}

/// A claim on `store` of `r` in a transaction of its own, on another thread: whether it won.
std::future<bool> claim_elsewhere(si::mariadb::store& store, si::claim_request r) {
    return std::async(std::launch::async, [&store, r] {
        auto tx = store.begin();
        const bool won = tx.claim(r).won;
        tx.commit();
        return won;
    });
}

si::error_category category_of(const std::function<void()>& work, std::string* sqlstate = nullptr) {
    try {
        work();
    } catch (const si::error& e) {
        if (sqlstate) *sqlstate = e.sqlstate();
        return e.category();
    }
    BOOST_FAIL("no seqinbox::error was thrown");
    return si::error_category::internal;
}

std::uint64_t connection_of(si::mariadb::store::transaction& tx) { return tx.id() >> 32; }

}  // namespace

BOOST_AUTO_TEST_CASE(soci_counts_an_unchanged_duplicate_as_an_affected_row_so_the_claim_reads_its_token_back) {
    fixture f;
    const auto instance = instance_of(f);
    {
        auto tx = f.store.begin();
        BOOST_TEST(tx.claim(request(instance)).won);
        tx.commit();
    }
    // The trap: SOCI connects with CLIENT_FOUND_ROWS, so the duplicate counts 1 like an insert.
    soci::statement st = (f.inspection().prepare << "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id,"
                                                    " sequence_instance_id, created_at, claim_token) VALUES ('T', 'k1', " +
                                                        std::to_string(instance) +
                                                        ", UTC_TIMESTAMP(6), 1) ON DUPLICATE KEY UPDATE message_type = message_type");
    st.execute(true);
    BOOST_TEST(st.get_affected_rows() == 1);
    // The store is not fooled.
    auto tx = f.store.begin();
    BOOST_TEST(!tx.claim(request(instance)).won);
    BOOST_TEST(tx.claim(request(instance, "k2")).won);
    BOOST_TEST(!tx.claim(request(instance, "k2")).won, "a key this transaction claimed already is lost");
}

BOOST_AUTO_TEST_CASE(keys_differing_in_trailing_spaces_are_different_claims) {
    fixture f;
    const auto instance = instance_of(f);
    auto tx = f.store.begin();
    BOOST_TEST(tx.claim(request(instance, "x")).won);
    BOOST_TEST(tx.claim(request(instance, "x ")).won);  // under utf8mb4_bin (PAD SPACE) it would be lost
    BOOST_TEST(tx.claim(request(instance, "X")).won);   // bytewise: no case folding either
}

BOOST_AUTO_TEST_CASE(a_concurrent_claim_waits_for_the_holder_then_loses_when_it_commits) {
    fixture f;
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    BOOST_TEST_REQUIRE(holder.claim(request(instance)).won);
    auto other = claim_elsewhere(f.store, request(instance));
    BOOST_TEST(still_waiting(other));
    holder.commit();
    BOOST_TEST(other.get() == false);
}

BOOST_AUTO_TEST_CASE(a_concurrent_claim_waits_for_the_holder_then_wins_when_it_rolls_back) {
    fixture f;
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    BOOST_TEST_REQUIRE(holder.claim(request(instance)).won);
    auto other = claim_elsewhere(f.store, request(instance));
    BOOST_TEST(still_waiting(other));
    holder.rollback();
    BOOST_TEST(other.get() == true);
}

BOOST_AUTO_TEST_CASE(a_concurrent_claim_wins_when_the_holders_connection_is_killed) {
    fixture f;
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    BOOST_TEST_REQUIRE(holder.claim(request(instance)).won);
    auto other = claim_elsewhere(f.store, request(instance));
    BOOST_TEST(still_waiting(other));
    f.inspection() << "KILL CONNECTION " + std::to_string(connection_of(holder));
    BOOST_TEST(other.get() == true);
    // The holder learns it lost its connection: not acknowledged, not active, dropped.
    BOOST_TEST(category_of([&] { holder.find_messages({"T", "k1"}); }) == si::error_category::connection);
    BOOST_TEST(!holder.active());
    const auto replaced = f.store.statistics().connections_replaced;
    holder = f.store.begin();  // the killed connection goes back to the pool, which drops it
    BOOST_TEST(f.store.statistics().connections_replaced == replaced + 1);
}

// An idle pooled session the server ended (an operator's KILL, wait_timeout: 8 hours by default,
// a relay idle overnight) is noticed when the pool hands it out, without a round trip, and replaced:
// the delivery that takes it does not fail.
BOOST_AUTO_TEST_CASE(an_idle_pooled_connection_killed_by_an_operator_is_replaced_before_use) {
    fixture f;
    const auto instance = instance_of(f);
    std::uint64_t pooled = 0;
    {
        auto tx = f.store.begin();
        tx.find_messages({"T", "k0"});
        pooled = connection_of(tx);
        tx.commit();
    }
    f.inspection() << "KILL CONNECTION " + std::to_string(pooled);
    const auto replaced = f.store.statistics().connections_replaced;
    auto tx = f.store.begin();
    BOOST_TEST(tx.claim(request(instance)).won);
    tx.commit();
    BOOST_TEST(connection_of(tx) != pooled);
    BOOST_TEST(f.store.statistics().connections_replaced == replaced + 1);
}

BOOST_AUTO_TEST_CASE(an_idle_pooled_connection_past_the_servers_wait_timeout_is_replaced_before_use) {
    fixture f;
    const auto instance = instance_of(f);
    {
        auto tx = f.store.begin();
        tx.session() << "SET SESSION wait_timeout = 1";  // as if 8 hours had passed
        tx.commit();
    }
    std::this_thread::sleep_for(2500ms);
    auto tx = f.store.begin();
    BOOST_TEST(tx.claim(request(instance)).won);
    tx.commit();
}

/// The server's sessions start with autocommit off (`autocommit = 0` in a server's configuration,
/// which some installations set) while this lives.
struct sessions_start_without_autocommit {
    explicit sessions_start_without_autocommit(soci::session& admin) : admin_(&admin) { admin << "SET GLOBAL autocommit = 0"; }
    ~sessions_start_without_autocommit() { *admin_ << "SET GLOBAL autocommit = 1"; }
    sessions_start_without_autocommit(const sessions_start_without_autocommit&) = delete;
    sessions_start_without_autocommit& operator=(const sessions_start_without_autocommit&) = delete;
    soci::session* admin_;
};

// What the store does outside a transaction (an instance created, its row committed at once) must
// not become an implicit transaction that nobody commits and whose locks the pooled session keeps.
BOOST_AUTO_TEST_CASE(a_server_whose_sessions_start_without_autocommit_commits_what_the_store_does_outside_transactions) {
    fixture f;
    sessions_start_without_autocommit off(f.inspection());
    si::mariadb::store store(si::conformance::detail::mariadb_fixture_options(f.url));
    const auto instance = store.create_or_get_instance("S", "new", now(), now() + 24h).id;
    long long committed = 0;
    f.inspection() << "SELECT count(*) FROM sequence_instance WHERE id = " + std::to_string(instance), soci::into(committed);
    BOOST_TEST(committed == 1);
    auto tx = store.begin();  // and a claim on it goes through: nothing holds the instance's row
    BOOST_TEST(tx.claim(request(instance)).won);
    tx.commit();
}

// A primary demoted to read-only (`read_only = 1`, as failover tools and proxies do) refuses the
// store's writes: the delivery is not acknowledged and the session is dropped, so that the next one
// is opened anew, where a proxy or a virtual IP leads to the primary of now.
BOOST_AUTO_TEST_CASE(a_server_that_turned_read_only_drops_the_session_like_a_lost_connection) {
    fixture f;
    // read_only binds users without the READ ONLY ADMIN privilege, as a service's user is.
    f.inspection() << "CREATE USER IF NOT EXISTS 'inbox'@'127.0.0.1' IDENTIFIED BY 'pw'";
    f.inspection() << "GRANT ALL ON " + seqinbox::test::mariadb_server::database_of(f.url) + ".* TO 'inbox'@'127.0.0.1'";
    auto options = si::conformance::detail::mariadb_fixture_options(f.url);
    options.url.replace(options.url.find("root@"), 5, "inbox:pw@");
    si::mariadb::store store(options);
    const auto instance = store.create_or_get_instance("S", "c1", now(), now() + 24h).id;
    f.inspection() << "SET GLOBAL read_only = 1";
    const auto replaced = store.statistics().connections_replaced;
    std::string text;
    const auto refused = [&] {
        try {
            auto tx = store.begin();
            tx.claim(request(instance));
            tx.commit();
        } catch (const si::error& e) {
            text = e.what();
            return e.category();
        }
        return si::error_category::internal;
    }();
    f.inspection() << "SET GLOBAL read_only = 0";
    BOOST_TEST(refused == si::error_category::connection, text);
    BOOST_TEST(text.find("read-only") != std::string::npos, text);
    BOOST_TEST(store.statistics().connections_replaced == replaced + 1);
    auto tx = store.begin();
    BOOST_TEST(tx.claim(request(instance)).won);
    tx.commit();
}

BOOST_AUTO_TEST_CASE(deleting_a_claim_waits_neither_for_another_keys_nor_for_its_own_keys_uncommitted_claim) {
    fixture f;
    const auto instance = instance_of(f);
    {
        auto tx = f.store.begin();
        BOOST_TEST_REQUIRE(tx.claim(request(instance, "v1", "B")).won);
        tx.commit();
    }
    auto holder = f.store.begin();
    BOOST_TEST_REQUIRE(holder.claim(request(instance, "c1", "A")).won);  // uncommitted, before B/v1 in key order
    auto other = f.store.begin();
    BOOST_TEST_REQUIRE(other.claim(request(instance_of(f, "c2"), "n1", "C")).won);  // uncommitted, after it
    auto deleting = std::async(std::launch::async, [&] {
        auto tx = f.store.begin();
        tx.delete_claim({"B", "v1"});  // a DELETE by row constructor scanned, and waited for A/c1
        tx.delete_claim({"C", "n1"});  // another transaction's uncommitted insert: not seen, not waited for
        tx.commit();
    });
    const bool done = deleting.wait_for(5s) == std::future_status::ready;
    BOOST_TEST(done, "delete_claim waited for another transaction's uncommitted claim");
    holder.commit();
    other.commit();
    deleting.get();
    BOOST_TEST(!f.has_claim({"B", "v1"}));
    BOOST_TEST(f.has_claim({"C", "n1"}));
}

BOOST_AUTO_TEST_CASE(rolling_back_to_a_savepoint_releases_the_claims_and_locks_taken_after_it) {
    fixture f;
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    const auto point = holder.savepoint();
    BOOST_TEST_REQUIRE(holder.claim(request(instance)).won);  // the claim and the instance lock
    auto other = claim_elsewhere(f.store, request(instance));
    BOOST_TEST(still_waiting(other));
    holder.rollback_to(point);
    const bool went_on = other.wait_for(5s) == std::future_status::ready;
    BOOST_TEST_REQUIRE(went_on, "the waiting claim went on only when the holder's transaction ended");
    BOOST_TEST(other.get() == true);
    BOOST_TEST(holder.active());
}

BOOST_AUTO_TEST_CASE(a_lock_waiter_reads_what_the_holder_committed_meanwhile) {
    fixture f;
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    holder.lock_instance(instance);
    auto waiter = std::async(std::launch::async, [&] {
        auto tx = f.store.begin();
        tx.find_messages({"A", "a1"});  // a read first: under REPEATABLE READ it would fix the snapshot
        auto locked = tx.lock_instance(instance);
        tx.commit();
        return locked.types.processed;
    });
    BOOST_TEST(still_waiting(waiter));
    holder.insert_message(row_of(instance, "A", "a1", si::message_state::processed));
    holder.commit();
    BOOST_TEST(waiter.get() == std::vector<std::string>{"A"}, boost::test_tools::per_element());

    // Without READ COMMITTED: the same order of reads on a REPEATABLE READ session misses it.
    soci::session rr(soci::mysql, si::test::mariadb_server::shared().soci_connect(si::test::mariadb_server::database_of(f.url)));
    rr << "SET SESSION tx_isolation = 'REPEATABLE-READ'";
    rr << "BEGIN";
    long long before = 0, after = 0;
    rr << "SELECT count(*) FROM sequenced_message", soci::into(before);
    f.inspection() << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
                      " state_changed_at) VALUES (" + std::to_string(instance) + ", 'B', 'b1', 'PROCESSED', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";
    rr << "SELECT count(*) FROM sequenced_message", soci::into(after);
    rr << "ROLLBACK";
    BOOST_TEST(after == before, "REPEATABLE READ hides the row committed after the first read");
}

BOOST_AUTO_TEST_CASE(a_state_step_beside_the_claim_transaction_does_not_wait_for_its_instance_lock) {
    fixture f;
    const auto instance = instance_of(f);
    auto claim = f.store.begin();
    BOOST_TEST_REQUIRE(claim.claim(request(instance, "s1", "A")).won);  // holds the instance lock
    auto step = std::async(std::launch::async, [&] {
        return f.store.store_message_beside(claim, row_of(instance, "A", "s1", si::message_state::processed));
    });
    const bool ready = step.wait_for(5s) == std::future_status::ready;
    BOOST_TEST_REQUIRE(ready, "the requires_new step waited for the claim transaction");
    BOOST_TEST(step.get() == si::stored_as::inserted);
    claim.commit();

    // The trap it avoids: an exclusive lock on the instance row itself makes the foreign key check
    // of a child insert on another connection wait (here until a 1 s lock wait timeout).
    soci::session holder(soci::mysql, si::test::mariadb_server::shared().soci_connect(si::test::mariadb_server::database_of(f.url)));
    holder << "BEGIN";
    long long id = 0;
    holder << "SELECT id FROM sequence_instance WHERE id = " + std::to_string(instance) + " FOR UPDATE", soci::into(id);
    f.inspection() << "SET SESSION innodb_lock_wait_timeout = 1";
    unsigned error_number = 0;
    try {
        f.inspection() << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
                          " state_changed_at) VALUES (" + std::to_string(instance) + ", 'B', 'b1', 'PROCESSED', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";
    } catch (const soci::mysql_soci_error& e) {
        error_number = e.err_num_;
    }
    holder << "ROLLBACK";
    BOOST_TEST(error_number == 1205u);
}

BOOST_AUTO_TEST_CASE(closing_the_instance_in_the_claim_transaction_does_not_hold_a_later_state_step) {
    fixture f;
    const auto instance = instance_of(f);
    auto claim = f.store.begin();
    BOOST_TEST_REQUIRE(claim.claim(request(instance, "s1", "A")).won);
    claim.close_instance(instance, now());  // an UPDATE of the instance row, were it sent now
    auto step = std::async(std::launch::async, [&] {
        return f.store.store_message_beside(claim, row_of(instance, "A", "s2", si::message_state::processed));
    });
    const bool ready = step.wait_for(5s) == std::future_status::ready;
    BOOST_TEST_REQUIRE(ready, "the state step waited for the claim transaction's update of the instance row");
    BOOST_TEST(step.get() == si::stored_as::inserted);
    claim.commit();
    BOOST_TEST(f.find_instance("S", "c1")->state == si::instance_state::closed);
}

BOOST_AUTO_TEST_CASE(a_deadlock_is_retryable_and_ends_the_transaction) {
    fixture f;
    const auto first = instance_of(f, "c1"), second = instance_of(f, "c2");
    auto a = f.store.begin();
    auto b = f.store.begin();
    a.lock_instance(first);
    b.lock_instance(second);
    // Each side's failure, if any: (category, SQLSTATE).
    using failure = std::optional<std::pair<si::error_category, std::string>>;
    const auto attempt = [](si::mariadb::store::transaction& tx, si::instance_id instance) -> failure {
        try {
            tx.lock_instance(instance);
            return std::nullopt;
        } catch (const si::error& e) {
            return std::pair{e.category(), e.sqlstate()};
        }
    };
    auto a_waits = std::async(std::launch::async, [&] { return attempt(a, second); });
    BOOST_TEST(still_waiting(a_waits, 300ms));
    const failure b_failure = attempt(b, first);  // closes the cycle: InnoDB picks a victim
    if (!b_failure) b.commit();                   // b won: its commit lets a go on, had a not been the victim
    const failure a_failure = a_waits.get();
    BOOST_TEST_REQUIRE(a_failure.has_value() != b_failure.has_value(), "exactly one of the two is the deadlock's victim");
    const auto& [category, sqlstate] = a_failure ? *a_failure : *b_failure;
    BOOST_TEST(category == si::error_category::retryable);
    BOOST_TEST(sqlstate == "40001");
    BOOST_TEST(!(a_failure ? a : b).active(), "the server rolled the victim back");
    if (b_failure) BOOST_TEST(a.active());
}

BOOST_AUTO_TEST_CASE(a_lock_wait_timeout_is_retryable_and_ends_the_transaction) {
    fixture f;
    auto options = si::conformance::detail::mariadb_fixture_options(f.url);
    options.lock_wait_timeout = 1s;
    si::mariadb::store impatient(options);
    const auto instance = instance_of(f);
    auto holder = f.store.begin();
    BOOST_TEST_REQUIRE(holder.claim(request(instance)).won);
    auto tx = impatient.begin();
    const auto started = std::chrono::steady_clock::now();
    BOOST_TEST(category_of([&] { tx.claim(request(instance)); }) == si::error_category::retryable);
    const bool soon = std::chrono::steady_clock::now() - started < 5s;
    BOOST_TEST(soon, "gave up after the 1 s lock wait timeout");
    BOOST_TEST(!tx.active());
}

BOOST_AUTO_TEST_CASE(a_claim_on_a_removed_instance_is_retryable_with_sqlstate_23503) {
    fixture f;
    const auto instance = instance_of(f);
    f.inspection() << "DELETE FROM sequence_instance WHERE id = " + std::to_string(instance);
    auto tx = f.store.begin();
    std::string sqlstate;
    BOOST_TEST(category_of([&] { tx.claim(request(instance)); }, &sqlstate) == si::error_category::retryable);
    BOOST_TEST(sqlstate == std::string(si::instance_removed_sqlstate));
    // The engine ends the transaction after a failed claim: left open, its foreign key check's lock
    // on the deleted row's gap can hold the new instance's insert (seen once under the sanitizers).
    tx.rollback();
    // and the instance is read afresh: a new row
    BOOST_TEST(instance_of(f) != instance);
}

// The store sends several statements per query on its own sessions; a listener's session must not
// run stacked statements (SQL a listener concatenated could then carry a second statement, and an
// implicit commit inside it would commit the claim mid-delivery).
BOOST_AUTO_TEST_CASE(a_listeners_session_runs_one_statement_per_query) {
    fixture f;
    const auto instance = instance_of(f);
    auto tx = f.store.begin();
    BOOST_TEST_REQUIRE(tx.claim(request(instance)).won);
    bool refused = false;
    try {
        tx.session() << "SELECT 1; CREATE TABLE stacked_by_a_listener (a INT)";
    } catch (const soci::soci_error&) {
        refused = true;
    }
    BOOST_TEST(refused);
    long long stacked = 0;
    f.inspection() << "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
                      " AND table_name = 'stacked_by_a_listener'",
        soci::into(stacked);
    BOOST_TEST(stacked == 0);
    // The store goes on on the same connection, several statements per query again.
    BOOST_TEST(tx.store_message(row_of(instance, "T", "k1", si::message_state::processed)) == si::stored_as::inserted);
    tx.commit();
    auto next = f.store.begin();
    BOOST_TEST(next.claim(request(instance, "k2")).won);
    next.commit();
}

// A statement sent with the COMMIT that fails without ending the transaction (here KILL QUERY of
// the instance close waiting for a row lock) must not leave the transaction open without it: a
// later commit() would commit the claim and leave the instance OPEN.
BOOST_AUTO_TEST_CASE(a_commit_whose_kept_statement_fails_rolls_the_transaction_back) {
    fixture f;
    const auto instance = instance_of(f);
    auto tx = f.store.begin();
    BOOST_TEST_REQUIRE(tx.claim(request(instance, "w1")).won);
    soci::session holder(soci::mysql, si::test::mariadb_server::shared().soci_connect(si::test::mariadb_server::database_of(f.url)));
    holder << "BEGIN";
    holder << "SELECT id FROM sequence_instance WHERE id = " + std::to_string(instance) + " LOCK IN SHARE MODE";
    std::thread killer([&f] {
        for (int i = 0; i < 200; ++i) {
            std::this_thread::sleep_for(20ms);
            long long waiting = 0;
            soci::indicator found = soci::i_null;
            f.inspection() << "SELECT MIN(id) FROM information_schema.processlist WHERE info LIKE 'UPDATE sequence_instance SET state%'",
                soci::into(waiting, found);
            if (found == soci::i_ok) {
                f.inspection() << "KILL QUERY " + std::to_string(waiting);
                return;
            }
        }
    });
    tx.close_instance(instance, now());
    BOOST_TEST(category_of([&] { tx.commit(); }) == si::error_category::retryable);
    killer.join();
    holder << "ROLLBACK";
    BOOST_TEST(!tx.active());
    long long claims = 0;
    f.inspection() << "SELECT count(*) FROM sequential_inbox_idempotence WHERE idempotence_id = 'w1'", soci::into(claims);
    BOOST_TEST(claims == 0);  // rolled back with the close it could not make
}

BOOST_AUTO_TEST_CASE(a_connection_string_that_does_not_parse_is_named_without_its_password) {
    si::mariadb::store_options options;
    options.url = "mariadb://seqinbox:s3cret@db.example:notaport/inbox";
    try {
        si::mariadb::store s(options);
        BOOST_FAIL("the store opened");
    } catch (const si::error& e) {
        BOOST_TEST(e.category() == si::error_category::configuration);
        const std::string text = e.what();
        BOOST_TEST(text.find("s3cret") == std::string::npos, text);
        BOOST_TEST(text.find("mariadb://") != std::string::npos, text);
    }
    BOOST_TEST(si::mariadb::redact_url("mariadb://u%40x:p%2Fw@h:3307/d") == "mariadb://u%40x:***@h:3307/d");
}
