// Housekeeping on PostgreSQL beyond the conformance suite: what only real row locks and real
// indexes show. A removal waiting for an instance's lock sees a close committed meanwhile; a
// closed-cleanup batch reads no more rows than it returns, whatever the instances still inside
// their window.
#define BOOST_TEST_MODULE seqinbox postgresql housekeeping
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;

namespace {

using namespace std::chrono_literals;

std::string migrated_database() {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    return conninfo;
}

pg::store_options options(const std::string& conninfo) {
    pg::store_options o;
    o.conninfo = conninfo;
    o.pool_size = 2;
    return o;
}

/// Waits until every other backend of this database has exited: their statistics are then in the
/// shared counters (a backend flushes them when it exits).
void wait_until_alone(soci::session& s) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (count(s, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()") > 0) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("other backends of the database did not exit");
        std::this_thread::sleep_for(5ms);
    }
    s << "SELECT pg_stat_clear_snapshot()";
}

/// Rows and index entries of sequence_instance read by the backends that have exited.
long long instance_rows_read(const std::string& conninfo) {
    soci::session s(soci::postgresql, conninfo);
    wait_until_alone(s);
    return count(s, "SELECT COALESCE(t.seq_tup_read, 0) + COALESCE((SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i"
                    " WHERE i.relid = t.relid), 0) FROM pg_stat_user_tables t WHERE t.relname = 'sequence_instance'");
}

/// Pages of the index `index` read (from the cache or not) by the backends that have exited.
long long index_pages_read(const std::string& conninfo, const std::string& index) {
    soci::session s(soci::postgresql, conninfo);
    wait_until_alone(s);
    return count(s, "SELECT COALESCE(sum(idx_blks_hit + idx_blks_read), 0) FROM pg_statio_user_indexes WHERE indexrelname = '" + index + "'");
}

/// Times of the CLOSED instances prepare_closed inserts, as SQL expressions of g (their number).
struct closed_rows {
    std::string prefix;  ///< of their context ids
    long long count = 0;
    std::string created_at, retain_until, closed_at;
};

/// Inserts CLOSED instances, alternately of OrderSequence and of Gone (a sequence not listed in
/// the windows), on a session that has exited when this returns (its own reads are counted).
void prepare_closed(const std::string& conninfo, const std::vector<closed_rows>& inserts) {
    soci::session s(soci::postgresql, conninfo);
    s << "ALTER TABLE sequence_instance SET (autovacuum_enabled = false)";
    for (const auto& rows : inserts)
        s << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, closed_at)"
             " SELECT CASE WHEN g % 2 = 0 THEN 'OrderSequence' ELSE 'Gone' END, '" + rows.prefix + "-' || g, 'CLOSED', " +
                 rows.created_at + ", " + rows.retain_until + ", " + rows.closed_at + " FROM generate_series(1, " +
                 std::to_string(rows.count) + ") AS g";
    s << "ANALYZE sequence_instance";
}

const si::forward_waiting ignore_waiting = [](const si::sequence_instance&, std::span<const si::message_record>) {};

}  // namespace

BOOST_AUTO_TEST_CASE(removal_passes_over_an_instance_a_writer_holds_and_keeps_it_once_closed) {
    // A delivery in progress holds the instance: removal does not wait for it (a stop of the
    // relay would wait with it), and the next run finds it again, as CLOSED if it closed.
    const auto conninfo = migrated_database();
    pg::store store(options(conninfo));
    soci::session s(soci::postgresql, conninfo);
    const long long id = si::test::create_instance(s, "OrderSequence", "o1");
    si::test::mark_due_for_removal(conninfo, id);
    const auto now = std::chrono::system_clock::now();
    si::scan_position after;
    const auto found = store.removable_instances(now, 10, after);
    BOOST_TEST_REQUIRE(found.size() == 1u);

    soci::session writer(soci::postgresql, conninfo);  // a consumer closing the instance
    soci::transaction closing(writer);
    writer << "SELECT 1 FROM sequence_instance WHERE id = :id FOR NO KEY UPDATE", soci::use(id);
    auto removal = std::async(std::launch::async, [&] { return store.remove_instances(found, si::removal_condition::expired(now), ignore_waiting); });
    const bool returned = removal.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    BOOST_TEST(returned, "removal waited for the writer's lock");
    writer << "UPDATE sequence_instance SET state = 'CLOSED', closed_at = now() WHERE id = :id", soci::use(id);
    closing.commit();
    BOOST_TEST(removal.get() == 0u);
    BOOST_TEST(store.remove_instances(found, si::removal_condition::expired(now), ignore_waiting) == 0u);  // closed: its window applies
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED' AND id = " + std::to_string(id)) == 1);
}

BOOST_AUTO_TEST_CASE(a_closed_cleanup_batch_reads_no_more_rows_than_it_finds) {
    // 20,000 CLOSED instances inside their window: of a listed sequence (1 h) and of one not
    // listed (its retention, 24 h); 5 past it. A batch reads about the rows it returns, not the
    // 20,000 it passes over.
    const auto conninfo = migrated_database();
    const std::vector<si::deduplication_window> windows{{"OrderSequence", 1h}};
    prepare_closed(conninfo, {{"young", 20'000, "now() - interval '10 minutes'", "now() + interval '24 hours' - interval '10 minutes'",
                               "now() - interval '5 minutes'"},
                              {"old", 5, "now() - interval '3 days'", "now() - interval '2 days'", "now() - interval '2 days'"}});
    const long long before = instance_rows_read(conninfo);
    std::vector<si::instance_id> found, second;
    {
        pg::store store(options(conninfo));
        si::scan_position after;
        found = store.closed_instances(std::chrono::system_clock::now(), windows, 100, after);
        second = store.closed_instances(std::chrono::system_clock::now(), windows, 100, after);
    }
    const long long read = instance_rows_read(conninfo) - before;
    BOOST_TEST(found.size() == 5u);
    BOOST_TEST(second.empty());
    BOOST_TEST_MESSAGE("two closed-cleanup batches read " << read << " rows and index entries of sequence_instance");
    BOOST_TEST(read < 100);  // by id through every CLOSED instance before (over 20,000)
}

BOOST_AUTO_TEST_CASE(closed_cleanup_batches_do_not_walk_the_entries_of_those_deleted_before) {
    // Cleanup deletes at the start of each (sequence, retention) group of the index, whose dead
    // entries stay until vacuum: a batch that looked for the groups from there would walk every
    // entry deleted so far in the run, not a few pages. (The groups' ends hold instances still
    // inside their window, as those of a sequence in use do.)
    const auto conninfo = migrated_database();
    constexpr long long instances = 20'000, batch = 100;
    const std::vector<si::deduplication_window> windows{{"OrderSequence", 1h}};
    prepare_closed(conninfo, {{"old", instances, "now() - interval '3 days'", "now() - interval '2 days'",
                               "now() - interval '2 days' + g * interval '1 millisecond'"},
                              {"young", 2'000, "now() - interval '1 day'", "now()", "now() - interval '5 minutes'"}});  // inside their window
    const long long before = index_pages_read(conninfo, "sequence_instance_closed_window");
    long long batches = 0, removed = 0;
    {
        pg::store store(options(conninfo));
        si::scan_position after;
        for (;;) {
            const auto now = std::chrono::system_clock::now();
            const auto found = store.closed_instances(now, windows, batch, after);
            ++batches;
            if (found.empty()) break;
            removed += static_cast<long long>(store.remove_instances(found, si::removal_condition::window_passed(now, windows), ignore_waiting));
        }
    }
    const long long pages = index_pages_read(conninfo, "sequence_instance_closed_window") - before;
    BOOST_TEST(removed == instances);
    BOOST_TEST_MESSAGE(batches << " closed-cleanup batches read " << pages << " pages of its index");
    BOOST_TEST(pages < batches * 40);
}

// A job lock is a lease row: nothing stays open while it is held (no connection lent out, no
// transaction: no snapshot, no idle-in-transaction timeout, nothing for a pooler's PAUSE to wait
// for), and it excludes every other store until given back.
BOOST_AUTO_TEST_CASE(a_held_job_lock_keeps_nothing_open_outlives_the_idle_timeout_and_excludes_others) {
    const auto conninfo = migrated_database();
    auto o = options(conninfo);
    o.idle_in_transaction_timeout = 1s;
    pg::store holder(o), other(options(conninfo));
    auto held = holder.try_lock_job("seqinbox.closed_cleanup");
    BOOST_REQUIRE(static_cast<bool>(held));
    soci::session admin(soci::postgresql, conninfo);
    const std::string open_transactions =
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'";
    BOOST_TEST(count(admin, open_transactions) == 0);
    std::this_thread::sleep_for(1500ms);
    BOOST_TEST(!static_cast<bool>(other.try_lock_job("seqinbox.closed_cleanup")));
    BOOST_TEST(static_cast<bool>(other.try_lock_job("seqinbox.expiry")));
    BOOST_TEST(held.renew());
    held = {};
    BOOST_TEST(static_cast<bool>(other.try_lock_job("seqinbox.closed_cleanup")));
}

BOOST_AUTO_TEST_CASE(an_expired_lease_goes_to_the_next_taker_and_its_first_holder_learns_it_lost_it) {
    const auto conninfo = migrated_database();
    auto short_lease = options(conninfo);
    short_lease.job_lease = 300ms;
    pg::store holder(short_lease), other(options(conninfo)), third(options(conninfo));
    auto first = holder.try_lock_job("seqinbox.removal");
    BOOST_REQUIRE(static_cast<bool>(first));
    BOOST_TEST(first.renew());  // renewed: still 300 ms from now
    BOOST_TEST(!static_cast<bool>(other.try_lock_job("seqinbox.removal")));
    std::this_thread::sleep_for(400ms);  // the holder stalled (or died) past its lease
    auto second = other.try_lock_job("seqinbox.removal");
    BOOST_REQUIRE(static_cast<bool>(second));
    BOOST_TEST(!first.renew());
    BOOST_TEST(!static_cast<bool>(first));
    first = {};  // gives back nothing of the new holder's
    BOOST_TEST(!static_cast<bool>(third.try_lock_job("seqinbox.removal")));
    BOOST_TEST(second.renew());
}

// The housekeeper renews its lease before each batch: a job whose lease another service instance
// took (the pace's pause outlasted the lease) stops rather than run beside the new holder.
BOOST_AUTO_TEST_CASE(a_housekeeper_that_lost_its_lease_between_two_batches_stops_the_job) {
    const auto conninfo = migrated_database();
    prepare_closed(conninfo, {{"old", 6, "now() - interval '3 days'", "now() - interval '2 days'", "now() - interval '2 days'"}});
    auto short_lease = options(conninfo);
    short_lease.job_lease = 100ms;
    pg::store holder(short_lease), intruder(options(conninfo));
    si::memory::error_sink sink;
    si::housekeeping_options pace;
    pace.batch_size = 1;
    pace.work_share = 0.001;  // a pause of 999 times each batch: well over the lease
    pace.deduplication_windows = {{"OrderSequence", 1h}};
    si::basic_housekeeper<pg::store, si::memory::error_sink> housekeeper(holder, sink, pace);
    std::atomic<bool> taken = false;
    std::jthread taker([&](const std::stop_token& stop) {
        soci::session admin(soci::postgresql, conninfo);
        while (!stop.stop_requested() && count(admin, "SELECT count(*) FROM seqinbox_job_lease") == 0)  // the housekeeper's first
            std::this_thread::sleep_for(1ms);
        while (!stop.stop_requested() && !taken) {
            if (auto lock = intruder.try_lock_job("seqinbox.closed_cleanup")) {
                taken = true;
                std::this_thread::sleep_for(3s);  // held while the housekeeper tries to renew
            }
            std::this_thread::sleep_for(5ms);
        }
    });
    const auto report = housekeeper.run_once();
    BOOST_TEST(taken.load());
    BOOST_REQUIRE(!report.jobs.empty());
    BOOST_TEST(report.jobs.front().job == "closed_cleanup");
    BOOST_TEST(!report.jobs.front().complete);
    BOOST_TEST(report.jobs.front().rows < 6u);
    BOOST_TEST(!report.complete);
}
