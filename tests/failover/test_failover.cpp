// The relay through real failovers (label topology): `seqinbox run` with 2 consumer threads
// against the mock cluster and a pg_auto_failover formation (pg_formation.hpp: a monitor, a primary
// and a synchronous standby), given the formation's multi-host URI (target_session_attrs=
// read-write). Records arrive steadily; the primary's postmaster is SIGKILLed, the monitor promotes
// the standby, the old primary rejoins as standby, and the same happens the other way. Afterwards
// no logical message is missing, each context's output is in declared order, the repeats stay
// within a batch per consumer thread per failover (reported per failover and thread), and the
// database holds no PROCESSED message without its claim, no WAITING message whose condition is
// met, and no message or claim in another context's instance (tests/relay/crash_checks.hpp).
// The old primary's keeper is paused (SIGSTOP) across the kill until the standby is promoted: it
// would restart PostgreSQL within a second, often before telling the monitor, which then never
// fails over (seen here: ten kills of one primary, 6 s apart, and no failover). Printed per
// failover: the time from the kill until the standby answered read-write, until the relay
// decided again, and until the old primary was a standby again.
// SEQINBOX_FAILOVER_SEED=N repeats a run's workload (timing still varies); a failing run (any
// run with SEQINBOX_FAILOVER_KEEP set) keeps the relay's log, the repeats and the formation's logs.
#define BOOST_TEST_MODULE seqinbox relay failover
#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "failover/pg_formation.hpp"
#include "relay/crash_checks.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/logger/utc_time.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/yaml/loader.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr int consumer_threads = 2;
/// Small batches keep the bound on repeats (a batch per consumer thread per failover) meaningful.
constexpr int batch_size = 10;
constexpr int failovers = 2;
/// 1,500 contexts, about 6,900 records (fewer under the sanitizers: SEQINBOX_FAILOVER_CONTEXTS),
/// fed evenly over feed_time (about 140 a second, the relay's pace here on 2 cores being 200-350):
/// the feed usually lasts through both failovers (35-40 s from its start here, 130 s on a slow CI
/// machine), so that the relay is deciding when each kill comes; a reserve produced after each
/// promotion gives it input to decide then in any case.
std::size_t contexts_of_this_run() {
    const char* given = std::getenv("SEQINBOX_FAILOVER_CONTEXTS");
    return given != nullptr ? std::stoul(given) : 1500;
}
constexpr auto feed_time = 50s;
constexpr auto feed_pace = 250ms;
/// Records produced at once after each promotion (steady_feed::produce_now).
constexpr std::size_t reserve_per_failover = 200;

std::uint64_t seed_of_this_run() {
    if (const char* given = std::getenv("SEQINBOX_FAILOVER_SEED")) return std::stoull(given);
    return std::random_device{}();
}

double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }

/// Produces the workload's records a slice at a time, every `pace`, over `lasting`, but for a
/// reserve of `reserved` records, which produce_now() hands out (after each promotion: the relay
/// then has undecided input however long the failover took — on a slow machine the steady part
/// was all decided before the second failover, and "the relay decided again" could not be seen),
/// and finish() produces with the rest.
class steady_feed {
public:
    steady_feed(const si::testing::order_workload& work, si::testing::mock_cluster& cluster, std::uint64_t seed, std::chrono::seconds lasting,
                std::chrono::milliseconds pace, std::size_t reserved)
        : work_(work), cluster_(cluster), seed_(seed), reserved_(std::min(reserved, work.records.size())), thread_([lasting, pace, this] {
              const auto slices = static_cast<std::size_t>(std::chrono::milliseconds(lasting) / pace);
              const std::size_t per_slice = (work_.records.size() - reserved_ + slices - 1) / slices;
              while (!hurry_ && produce_steady(per_slice))
                  for (auto waited = 0ms; waited < pace && !hurry_; waited += 10ms) std::this_thread::sleep_for(10ms);
          }) {}
    ~steady_feed() { finish(); }
    steady_feed(const steady_feed&) = delete;
    steady_feed& operator=(const steady_feed&) = delete;

    /// Produces the next `n` records at once, taken from the reserve.
    void produce_now(std::size_t n) {
        const std::lock_guard lock(mutex_);
        n = std::min(n, reserved_);
        reserved_ -= n;
        produce_next(n);
    }

    void finish() {
        hurry_ = true;
        if (thread_.joinable()) thread_.join();
        const std::lock_guard lock(mutex_);
        reserved_ = 0;
        produce_next(work_.records.size() - next_);
    }

private:
    /// Whether records outside the reserve remain after this slice.
    bool produce_steady(std::size_t per_slice) {
        const std::lock_guard lock(mutex_);
        const auto steady_end = work_.records.size() - reserved_;
        produce_next(std::min(per_slice, steady_end - next_));
        return next_ < steady_end;
    }
    void produce_next(std::size_t n) {
        if (n == 0) return;
        work_.produce(cluster_, input, input_partitions, seed_ + next_, next_, next_ + n);
        next_ += n;
    }

    const si::testing::order_workload& work_;
    si::testing::mock_cluster& cluster_;
    const std::uint64_t seed_;
    std::mutex mutex_;
    std::size_t next_ = 0;      ///< the first record not produced yet
    std::size_t reserved_;      ///< records kept for produce_now()
    std::atomic<bool> hurry_{false};
    std::thread thread_;        ///< last: it starts with the members above in place
};

/// The figures of one failover, in seconds from the first kill.
struct failover_figures {
    bool in_flight = false;  ///< a transaction of the relay had written when the kill came
    double promoted = 0, decided = 0, rejoined = 0;
};

/// Waits (up to 5 s) until a transaction of the relay on `node` has written (holds a transaction
/// id: a claim, a state step), so that the kill catches a decision in flight; whether one did.
bool writing_transaction_on(const pg_formation& formation, int node, const std::string& dbname) {
    soci::session watch(soci::postgresql, formation.conninfo(node, dbname));
    return wait_until(
        [&] {
            return count(watch, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                " AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL") > 0;
        },
        5s, 1ms);
}

long long processed_rows(const std::string& conninfo) {
    try {
        return count(conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'");
    } catch (const std::exception&) {
        return -1;  // no primary answers right now
    }
}

/// Fails node `from` over to the other: SIGKILLs its postmaster (its keeper paused) while a
/// transaction of the relay is writing, waits for the monitor to start a failover, then for
/// the other node to answer the URI read-write and the old one to be demoted (`crash_end`: from
/// then on no decision can be undone by this failover), for the relay to decide again (PROCESSED
/// rows grow on the new primary), and for the old primary to follow the new one.
failover_figures fail_over(pg_formation& formation, int from, const std::string& dbname, const std::string& conninfo,
                           steady_feed& feed, std::string& crash_end) {
    failover_figures f;
    const int to = 1 - from;
    const auto started = steady::now();
    const auto failing_over = [&] {
        const auto s = formation.states();
        return s.size() == pg_formation::nodes && s[to].assigned != "secondary";
    };
    // Its keeper would restart PostgreSQL within a second, often before it told the monitor: a
    // crash the monitor never sees. Paused, it lets the monitor find the node down.
    formation.pause_keeper(from, true);
    f.in_flight = writing_transaction_on(formation, from, dbname);
    BOOST_TEST_REQUIRE(::kill(formation.postmaster(from), SIGKILL) == 0, "no postmaster of node " << from + 1 << " to kill");
    BOOST_TEST_REQUIRE(wait_until(failing_over, 60s), "the monitor did not fail node " << from + 1 << " over\n"
                                                                                       << formation.keep_logs());
    BOOST_TEST_REQUIRE(wait_until(
                           [&] {
                               const auto s = formation.states();
                               return s.size() == pg_formation::nodes && s[to].assigned.ends_with("primary") && formation.writable() == to;
                           },
                           60s),
                       "node " << to + 1 << " was not promoted\n" << formation.keep_logs());
    f.promoted = seconds_since(started);
    formation.pause_keeper(from, false);  // it restarts PostgreSQL, finds it demoted, and follows the new primary
    crash_end = si::logger::utc_time(std::chrono::system_clock::now());
    long long first = -1;
    BOOST_TEST(wait_until([&] { return (first = processed_rows(conninfo)) >= 0; }, 30s));
    feed.produce_now(reserve_per_failover);  // after `first`: input the relay can only decide from now on
    BOOST_TEST(wait_until([&] { return processed_rows(conninfo) > first; }, 60s), "the relay decided nothing after the failover");
    f.decided = seconds_since(started);
    BOOST_TEST_REQUIRE(wait_until([&] { return formation.in_sync(to); }, 120s),
                       "node " << from + 1 << " did not rejoin as standby\n" << formation.keep_logs());
    f.rejoined = seconds_since(started);
    return f;
}

/// Keeps the relay's log, the repeats and the formation's logs when the test failed or
/// SEQINBOX_FAILOVER_KEEP is set, however it ends.
class evidence_on_failure {
public:
    evidence_on_failure(const relay_world& world, const pg_formation& formation, std::uint64_t seed)
        : world_(world), formation_(formation), seed_(seed) {}
    evidence_on_failure(const evidence_on_failure&) = delete;
    evidence_on_failure& operator=(const evidence_on_failure&) = delete;
    ~evidence_on_failure() {
        namespace utf = boost::unit_test;
        if (utf::results_collector.results(utf::framework::current_test_case().p_id).passed() &&
            std::getenv("SEQINBOX_FAILOVER_KEEP") == nullptr)
            return;
        const auto kept = std::filesystem::temp_directory_path() / ("seqinbox-failover-test-" + std::to_string(seed_));
        std::error_code ignored;
        std::filesystem::create_directories(kept, ignored);
        std::filesystem::copy(world_.dir, kept, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing,
                              ignored);
        std::filesystem::copy_file(formation_.keep_logs(), kept / "formation.log", std::filesystem::copy_options::overwrite_existing, ignored);
        BOOST_TEST_MESSAGE("evidence kept in " << kept);
    }

private:
    const relay_world& world_;
    const pg_formation& formation_;
    std::uint64_t seed_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(two_failovers_under_the_relay_lose_nothing_keep_order_and_leave_a_consistent_database) {
    const auto seed = seed_of_this_run();
    BOOST_TEST_MESSAGE("seed " << seed << " (SEQINBOX_FAILOVER_SEED repeats it)");
    std::mt19937_64 rng(seed);
    const auto started = steady::now();

    pg_formation formation;
    BOOST_TEST_MESSAGE("formation up in " << seconds_since(started) << " s: " << formation.uri());
    const auto dbname = [&] {
        const auto uri = formation.create_database();
        return uri.substr(uri.rfind('/') + 1, uri.find('?') - uri.rfind('/') - 1);
    }();
    BOOST_TEST(!si::postgresql::migrate(formation.uri(dbname)).applied.empty());  // the URI form, a libpq multi-host one
    relay_world world(formation.multi_host(dbname));  // the test's own sessions: SOCI takes key=value
    const evidence_on_failure evidence(world, formation, seed);

    si::testing::order_workload work(contexts_of_this_run(), 0.15, rng());
    shuffle_in_windows(work, 50);
    BOOST_TEST_MESSAGE(work.records.size() << " records, " << work.logical << " logical messages");
    const auto logical = static_cast<long long>(work.logical);
    steady_feed feed(work, world.cluster, rng(), feed_time, feed_pace, reserve_per_failover * failovers);

    const std::string group = "relay-failover";
    auto arguments = world.arguments(group, consumer_threads);
    for (std::size_t i = 0; i + 1 < arguments.size(); ++i)
        if (arguments[i] == "--postgres") arguments[i + 1] = formation.uri(dbname);
    arguments.insert(arguments.end(), {"--batch-size", std::to_string(batch_size)});
    relay_process relay(arguments, world.dir / "relay-1.log");
    BOOST_TEST_REQUIRE(relay.http_port() != 0, "the relay did not start:\n" << relay.log());

    std::vector<std::vector<std::int64_t>> marks;
    std::vector<std::string> crash_ends(failovers), crash_kinds;
    std::vector<failover_figures> figures;
    int primary = 0;
    for (int k = 0; k < failovers; ++k) {
        BOOST_TEST_REQUIRE(world.wait_for_output(logical * (k + 1) / (failovers + 3)), relay.log());
        marks.push_back(world.cluster.end_offsets(output, output_partitions));
        crash_kinds.push_back("node " + std::to_string(primary + 1) + " -> node " + std::to_string(2 - primary));
        figures.push_back(fail_over(formation, primary, dbname, world.conninfo, feed, crash_ends[static_cast<std::size_t>(k)]));
        const auto& f = figures.back();
        BOOST_TEST_MESSAGE("failover " << k + 1 << " (" << crash_kinds.back()
                                       << (f.in_flight ? ", a relay transaction writing" : ", no relay transaction writing")
                                       << "): read-write after " << f.promoted << " s, relay deciding again after " << f.decided
                                       << " s, old primary a standby after " << f.rejoined << " s");
        BOOST_TEST_REQUIRE(relay.wait(0s) == -1, "the relay exited\n" << relay.log());
        primary = 1 - primary;
    }
    feed.finish();

    BOOST_TEST(world.wait_for_input_decided(group, logical), "the relay committed the end of its input within 120 s\n" << relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const auto records = world.cluster.read_all(output, output_partitions, static_cast<std::size_t>(world.published()));
    expect_in_declared_order(records, work, records.size());  // repeats: below
    std::ofstream listing(world.dir / "repeats.txt");
    expect_repeats_within_one_batch_per_thread_per_crash(
        repeats_of_each_crash(records, crash_ends, marks, publication_lines(world.dir, 1), listing), crash_kinds, consumer_threads,
        batch_size);

    soci::session db(soci::postgresql, world.conninfo);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == logical);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message") == logical, "one row per logical message");
    const auto unclaimed = processed_without_their_claim(db);
    BOOST_TEST(unclaimed.empty(), unclaimed.size() << " PROCESSED messages without their claim:" << listed(unclaimed));
    const auto decls = si::yaml::load_string<std::string>(declarations_yaml, "orders.yaml", si::yaml::registry<std::string>{});
    const auto stuck = waiting_though_released(db, decls);
    BOOST_TEST(stuck.empty(), stuck.size() << " WAITING messages whose condition is met:" << listed(stuck));
    std::map<std::string, std::string> context_of;
    for (const auto& r : work.records) context_of[std::string(r.find_header("idempotence-id").value_or(""))] = r.key.value_or("");
    const auto misplaced = in_another_context(db, context_of);
    BOOST_TEST(misplaced.empty(), misplaced.size() << " rows in an instance of another context:" << listed(misplaced));
    BOOST_TEST_MESSAGE(records.size() << " output records for " << work.logical << " logical messages, " << seconds_since(started)
                                      << " s in all");
}
