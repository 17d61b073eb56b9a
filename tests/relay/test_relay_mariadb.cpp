// `seqinbox run` (the relay) on the MariaDB store, as a user runs it: the real program as a child
// process with `--database mariadb://...`, librdkafka's mock cluster in the test process, a
// throwaway mariadbd. Shuffled, duplicated input becomes in-order output once per logical message;
// the relay SIGKILLed mid-run and its sessions ended by KILL CONNECTION lose nothing and keep the
// declared order, repeating at most the batches in progress.
#define BOOST_TEST_MODULE seqinbox relay mariadb
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kafka/kafka_world.hpp"
#include "mariadb/mariadb_server.hpp"
#include "postgresql/cli_runner.hpp"
#include "relay/http_client.hpp"
#include "relay/relay_process.hpp"
#include "relay/mariadb_relay_world.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/mariadb/inbox.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "support/world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

struct manual_clock_policies : si::default_policies {
    using clock = si::clock::manual_clock;
};

/// Stores `type` WAITING for its predecessors in an instance of `context` created two days ago,
/// so past its 24 h retention.
void buffer_in_expired_instance(const std::string& url, const std::string& type, const std::string& id, const std::string& context) {
    si::mariadb::store store({.url = url, .pool_size = 2});
    si::memory::source source;
    si::memory::error_sink sink;
    si::clock::manual_clock clock(std::chrono::system_clock::now() - std::chrono::hours(48));
    si::mariadb::inbox<si::memory::source, si::memory::error_sink, manual_clock_policies> inbox(store, source, sink,
                                                                                                si::testing::order_declarations(), {.clock = clock});
    for (const auto& m : inbox.declared().sequences.front().messages) inbox.on(m.qualified_type(), [](auto&&, auto&&) {});
    BOOST_TEST_REQUIRE(to_string(inbox.deliver(si::testing::record(type, id, context)).outcome) == "buffered");
}

}  // namespace

BOOST_AUTO_TEST_CASE(out_of_order_duplicated_input_is_published_once_in_declared_order) {
    mariadb_relay_world world;
    const si::testing::order_workload work(60, 0.3, 31);
    work.produce(world.cluster, input, input_partitions, 5);

    // More than PostgreSQL's default lock table lets one transaction hold: MariaDB's store has no
    // such limit, and the relay does not clamp.
    relay_process relay(world.arguments("relay-mariadb", 100000), world.dir / "relay.log");
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_processed(static_cast<long long>(work.logical)), relay.log());

    const auto health = http_get(port, "/healthz");
    BOOST_TEST(health.status == 200, health.body);
    const auto metrics = http_get(port, "/metrics");  // its gauges read the MariaDB store's views
    BOOST_TEST(metrics.status == 200);
    BOOST_TEST(contains(metrics.body, "seqinbox_consumed_messages_total{type=\"OrderShipped\"} 60"), metrics.body);
    BOOST_TEST(contains(metrics.body, "seqinbox_waiting_messages"), metrics.body);

    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    const auto log = relay.log();
    BOOST_TEST(!contains(log, "lock table"), "nothing to clamp on MariaDB");
    BOOST_TEST(contains(log, "batches of up to 100000 records"), log);
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work);
    BOOST_TEST(world.cluster.read_written(dead_letters, 1).empty());
    BOOST_TEST(world.count("SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}

/// Its sessions ended under it mid-stream (the relay reconnects), then SIGKILLed and started again
/// on the same group: every logical message is published, in declared order, and a crash repeats
/// at most what a batch per consumer thread had published before its transaction was lost.
BOOST_AUTO_TEST_CASE(killed_sessions_and_a_sigkilled_relay_lose_nothing_and_keep_the_order) {
    mariadb_relay_world world;
    const si::testing::order_workload work(200, 0.3, 32);
    const auto third = work.records.size() / 3;
    work.produce(world.cluster, input, input_partitions, 6, 0, third);

    relay_process first(world.arguments("relay-mariadb-crash"), world.dir / "first.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(40), first.log());
    work.produce(world.cluster, input, input_partitions, 7, third, 2 * third);
    const auto killed = world.kill_connections();
    BOOST_TEST_MESSAGE("KILL CONNECTION of " << killed << " sessions at " << world.published() << " published");
    BOOST_TEST(killed > 0);
    const auto before = world.published();
    BOOST_TEST_REQUIRE(world.wait_for_output(before + 40), first.log());  // it reconnected and goes on
    work.produce(world.cluster, input, input_partitions, 8, 2 * third);
    BOOST_TEST_REQUIRE(first.stop(SIGKILL) == 128 + SIGKILL);
    std::istringstream first_log(first.log());
    for (std::string line; std::getline(first_log, line);)
        if (contains(line, " error ")) BOOST_TEST_MESSAGE("first relay: " << line);
    // A killed session idle in the pool is replaced when next handed out, without an error; one
    // killed inside a transaction reports the loss ("the connection to MariaDB was lost"): either
    // way the relay went on (above) and loses nothing (below).
    const auto at_kill = world.published();
    BOOST_TEST_MESSAGE("SIGKILL at " << at_kill << " of " << work.logical << " published");
    BOOST_TEST(at_kill < static_cast<long long>(work.logical), "the SIGKILL came mid-stream");

    relay_process second(world.arguments("relay-mariadb-crash"), world.dir / "second.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), second.log());
    BOOST_TEST_REQUIRE(world.wait_for_processed(static_cast<long long>(work.logical)), second.log());
    BOOST_TEST(second.stop(SIGTERM) == 0, second.log());
    // Two crashes (the killed sessions, the SIGKILL), each undoing at most a batch per thread.
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work, 2 * mariadb_relay_threads * mariadb_relay_batch);
    BOOST_TEST(world.count("SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}

/// PgBouncer's --pooler is PostgreSQL's: with a MariaDB URL the relay refuses to start.
BOOST_AUTO_TEST_CASE(a_pooler_with_a_mariadb_url_is_refused) {
    const auto refused = run_cli("run --declarations /nonexistent.yaml --database mariadb://inbox@127.0.0.1:1/orders"
                                 " --bootstrap-servers 127.0.0.1:1 --dead-letter-topic dlq --pooler transaction");
    BOOST_TEST(refused.exit_code == 1, refused.output);
    BOOST_TEST(contains(refused.output, "--pooler is for PostgreSQL"), refused.output);
}

/// `seqinbox housekeep --once` on MariaDB: the WAITING message of an expired instance reaches the
/// dead-letter topic, then the instance is removed; a second run finds nothing.
BOOST_AUTO_TEST_CASE(housekeep_once_forwards_waiting_messages_before_removing_expired_instances) {
    mariadb_relay_world world;
    buffer_in_expired_instance(world.url, "OrderValidated", "v1", "o1");
    const std::string base = "housekeep --once --database " + shell_quote(world.url) + " --bootstrap-servers " +
                             world.cluster.bootstraps() + " --dead-letter-topic " + dead_letters +
                             " --producer-property log_level=0 --removal-delay 0s";
    const auto run = run_cli(base);
    BOOST_TEST(run.exit_code == 0, run.output);
    BOOST_TEST(contains(run.output, "instances marked expired   1"), run.output);
    BOOST_TEST(contains(run.output, "expired instances removed  1"), run.output);
    BOOST_TEST(contains(run.output, "waiting messages forwarded 1"), run.output);
    const auto forwarded = world.cluster.read_all(dead_letters, 1, 1);
    BOOST_TEST_REQUIRE(forwarded.size() == 1u);
    BOOST_TEST(forwarded.front().value == "OrderValidated:v1");
    BOOST_TEST(world.count("SELECT count(*) FROM sequence_instance") == 0);

    const auto again = run_cli(base + " --json");
    BOOST_TEST(again.exit_code == 0, again.output);
    BOOST_TEST(contains(again.output, "\"expired_removed\":0"), again.output);
}
