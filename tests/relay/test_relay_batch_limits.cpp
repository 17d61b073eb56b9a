// Issue 33, item 2: the relay under a server's default lock limits (max_locks_per_transaction 64,
// max_connections 100), as `seqinbox run` with a batch size the server cannot commit in one
// transaction. The relay clamps --batch-size to what PostgreSQL's lock table lets one batch
// transaction hold, and says so once at start naming the table; a backlog larger than the table
// then commits in full (before, an attempt at it failed with "out of shared memory" after
// publishing it all, and came again). A relay whose every batch fails at commit stops on SIGTERM
// within seconds (before: not within 120 s), committing nothing.
#define BOOST_TEST_MODULE seqinbox relay batch limits
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

/// Records in the backlog, the issue's: far more than one transaction can commit on a server with
/// the default limits (20,000 failed with "out of shared memory" at some attempts, not all).
constexpr long long backlog = 40000;

/// What the store allows one batch of the relay (1 consumer thread: a pool of 1 x 2 + 6 = 8
/// connections, four of them the jobs') with the server's defaults: its share of the 6,400-entry
/// lock table, 6400 / (2 x 8) = 400, less 64 for relations, one entry per record (listeners do
/// not join).
constexpr long long clamped = 6400 / (2 * 8) - 64;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A server started with PostgreSQL's own defaults, checked.
pg_server& default_limits_server() {
    static pg_server server(pg_server::commits::not_durable, pg_server::limits::server_defaults);
    return server;
}

void require_default_limits(const std::string& conninfo) {
    BOOST_TEST_REQUIRE(count(conninfo, "SELECT current_setting('max_locks_per_transaction')::bigint") == 64);
    BOOST_TEST_REQUIRE(count(conninfo, "SELECT current_setting('max_connections')::bigint") == 100);
    BOOST_TEST_REQUIRE(count(conninfo, "SELECT current_setting('max_prepared_transactions')::bigint") == 0);
}

/// `n` OrderCreated records of distinct orders (each a new key and a new sequence instance, each
/// released at once), spread over the input partitions.
void produce_new_orders(si::testing::mock_cluster& cluster, long long n) {
    for (long long i = 0; i < n; ++i) {
        const std::string context = "order-" + std::to_string(i);
        cluster.produce_async(input, si::testing::record("OrderCreated", "OrderCreated@" + context, context),
                              static_cast<std::int32_t>(i % input_partitions));
    }
    cluster.flush();
}

/// The relay's arguments: one consumer thread, --batch-size 50000 (the issue's), a linger long
/// enough that a poll takes the whole backlog it may.
std::vector<std::string> large_batch_arguments(const relay_world& world, const std::string& group) {
    auto arguments = world.arguments(group, 1);
    arguments.insert(arguments.end(), {"--batch-size", "50000", "--batch-linger", "1s"});
    return arguments;
}

/// Waits until the relay's log holds `part` after its first `after` (the start when empty); where
/// it begins, or npos.
std::size_t wait_for_log_after(const relay_process& relay, const std::string& part, std::chrono::seconds patience, const std::string& after = "") {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
        const std::string log = relay.log();
        const std::size_t from = log.find(after);
        const std::size_t at = from == std::string::npos ? from : log.find(part, from + after.size());
        if (at != std::string::npos || std::chrono::steady_clock::now() >= deadline) return at;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_batch_size_beyond_the_lock_table_is_clamped_and_a_large_backlog_commits_in_full) {
    relay_world world(default_limits_server());
    require_default_limits(world.conninfo);
    produce_new_orders(world.cluster, backlog);

    const auto started = std::chrono::steady_clock::now();
    relay_process relay(large_batch_arguments(world, "relay-clamp"), world.dir / "relay.log");
    const bool decided = wait_for_count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'", backlog,
                                        std::chrono::seconds(180));
    BOOST_TEST_MESSAGE(backlog << " records decided in " << seconds_since(started) << " s");
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST_REQUIRE(decided, count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'")
                                    << " of " << backlog << " PROCESSED; the log ends:\n"
                                    << relay.log().substr(relay.log().size() > 4000 ? relay.log().size() - 4000 : 0));

    const std::string log = relay.log();
    BOOST_TEST(contains(log, "batch size 50000 is more than PostgreSQL's lock table lets one transaction hold (6400 entries "
                             "(max_locks_per_transaction 64 x (max_connections 100 + max_prepared_transactions 0)), half of them for the "
                             "relay's 8 connections): batches of " +
                                 std::to_string(clamped) + " records"),
               log);
    BOOST_TEST(contains(log, "batches of up to " + std::to_string(clamped) + " records"), log);
    BOOST_TEST(!contains(log, "out of shared memory"), log);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message") == backlog);
    // The relay has exited: its output topic holds all it wrote, each order once.
    const auto written = world.cluster.read_written(output, output_partitions);
    std::set<std::string> orders;
    for (const auto& r : written) orders.insert(r.key.value_or(""));
    BOOST_TEST(static_cast<long long>(orders.size()) == backlog);
    BOOST_TEST(static_cast<long long>(written.size()) == backlog, "each order published once");
}

BOOST_AUTO_TEST_CASE(sigterm_stops_a_relay_whose_batches_all_fail_at_commit) {
    relay_world world(default_limits_server());
    // Every transaction that stored a message fails at COMMIT (a deferred constraint trigger).
    {
        soci::session db(soci::postgresql, world.conninfo);
        db << "CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS "
              "$$ BEGIN RAISE EXCEPTION 'the test refuses every commit'; END $$";
        db << "CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON sequenced_message DEFERRABLE INITIALLY DEFERRED "
              "FOR EACH ROW EXECUTE FUNCTION refuse_commit()";
    }
    produce_new_orders(world.cluster, backlog);

    relay_process relay(large_batch_arguments(world, "relay-failing"), world.dir / "relay.log");
    // The first failed batch: the consumer thread logs its error, pauses 1 s and tries again. Once
    // that attempt has decided a record (its decisions are logged before its commit), SIGTERM
    // arrives while a batch is being decided, as a relay's operator sends it at any time.
    const auto started = std::chrono::steady_clock::now();
    const std::string failure = " error consumer 1: ";
    BOOST_TEST_REQUIRE(wait_for_log_after(relay, failure, std::chrono::seconds(120)) != std::string::npos, relay.log());
    BOOST_TEST_MESSAGE("first failure logged " << seconds_since(started) << " s after start");
    BOOST_TEST_REQUIRE(wait_for_log_after(relay, "processed OrderCreated/", std::chrono::seconds(30), failure) != std::string::npos, relay.log());
    const auto signalled = std::chrono::steady_clock::now();
    const int status = relay.stop(SIGTERM, std::chrono::seconds(120));
    const double took = seconds_since(signalled);
    BOOST_TEST_MESSAGE("stopped " << took << " s after SIGTERM (exit status " << status << ")");
    BOOST_TEST(status == 0, relay.log());  // `seqinbox run` exits 0 on SIGTERM
    BOOST_TEST(took < 15.0, relay.log());
    BOOST_TEST(contains(relay.log(), "relay stopped"), relay.log());
    BOOST_TEST(contains(relay.log(), "the test refuses every commit"), "the batches failed at commit, for the test's trigger");

    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message") == 0);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequential_inbox_idempotence") == 0);
    for (const auto offset : world.cluster.committed("relay-failing", input, input_partitions))
        BOOST_TEST(offset < 0, "no input offset committed");
}
