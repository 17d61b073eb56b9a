// The relay (`seqinbox run --pooler transaction`) end to end through PgBouncer in transaction
// mode: 4 consumer threads, the operator-action and housekeeping jobs on their schedules, 8
// server connections for the relay's 17 clients (12 for consumers and jobs, 5 for the API), and
// every server connection ended twice mid-stream. Out-of-order, duplicated input is published
// once per logical message (a publish may repeat after an outage: at least once) in declared
// order, and nothing is left WAITING.
#define BOOST_TEST_MODULE seqinbox pgbouncer relay
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "pgbouncer_server.hpp"
#include "postgresql/cli_runner.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

/// The relay's arguments with its conninfo through `bouncer` and the pooler mode.
std::vector<std::string> through(const pgbouncer_server& bouncer, std::vector<std::string> arguments) {
    const auto at = std::find(arguments.begin(), arguments.end(), "--postgres");
    BOOST_REQUIRE(at != arguments.end() && at + 1 != arguments.end());
    *(at + 1) = bouncer.through(*(at + 1));
    arguments.insert(arguments.end(), {"--pooler", "transaction"});
    return arguments;
}

}  // namespace

BOOST_AUTO_TEST_CASE(four_consumer_threads_through_pgbouncer_publish_every_message_in_declared_order_across_server_restarts) {
    relay_world world;
    pgbouncer_server bouncer(*world.server, {.pool_size = 8});
    const si::testing::order_workload work(400, 0.2, 36);
    work.produce(world.cluster, input, input_partitions, 10);
    const std::string group = "relay-pgbouncer";
    relay_process relay(through(bouncer, world.arguments(group, 4)), world.dir / "relay.log");
    const auto logical = static_cast<long long>(work.logical);
    const std::string server_connections =
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()";
    for (int outage = 1; outage <= 2; ++outage) {
        BOOST_TEST_REQUIRE(world.wait_for_output(logical * outage / 4), relay.log());
        BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, server_connections, 1), relay.log());
        BOOST_TEST(world.terminate_connections() > 0, "outage " << outage << " ended PgBouncer's server connections");
    }
    BOOST_TEST_REQUIRE(world.wait_for_input_decided(group, logical), "the relay committed the end of its input within 120 s\n" << relay.log());
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'") == 0);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == logical);
    const auto pools = bouncer.show("POOLS");
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const auto log = relay.log();
    BOOST_TEST(!contains(log, "prepared statement"), log);
    BOOST_TEST(contains(log, "info relay stopped"), log);
    const auto records = world.cluster.read_written(output, output_partitions);
    expect_in_declared_order(records, work, records.size());
    BOOST_TEST(world.cluster.end_offsets(dead_letters, 1).at(0) == 0, "nothing is dead-lettered");
    for (auto row : pools)
        if (row["database"] == world.database_name())
            BOOST_TEST_MESSAGE("SHOW POOLS at the end: cl_active " << row["cl_active"] << ", cl_waiting " << row["cl_waiting"] << ", sv_active "
                                                                  << row["sv_active"] << ", sv_idle " << row["sv_idle"] << ", maxwait "
                                                                  << row["maxwait"] << " s");
    const long long passed = bouncer.transactions();  // fewer than the messages: the relay decides batches
    BOOST_TEST_MESSAGE("PgBouncer passed " << passed << " transactions");
    BOOST_TEST(passed > 0, "the relay's transactions went through PgBouncer");
}
