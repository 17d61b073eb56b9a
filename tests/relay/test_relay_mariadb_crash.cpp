// The relay (`seqinbox run --database mariadb://...`) while its MariaDB server is SIGKILLed
// mid-stream and started again: a server of its own, with durable commits (the store's
// guarantee rests on them, README "MariaDB / MySQL"). Nothing is lost, the declared order holds,
// and the repeats stay within the batches the crash cut short (one per consumer thread).
#define BOOST_TEST_MODULE seqinbox relay mariadb crash
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "postgresql/cli_runner.hpp"
#include "relay/mariadb_relay_world.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

BOOST_AUTO_TEST_CASE(a_sigkilled_server_loses_nothing_and_the_order_holds) {
    mariadb_server server(mariadb_server::commits::durable);
    mariadb_relay_world world(server);
    const si::testing::order_workload work(200, 0.3, 41);
    const auto half = work.records.size() / 2;
    work.produce(world.cluster, input, input_partitions, 9, 0, half);

    relay_process relay(world.arguments("relay-mariadb-server-crash"), world.dir / "relay.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(40), relay.log());
    work.produce(world.cluster, input, input_partitions, 10, half);
    server.stop();  // SIGKILL
    const auto at_crash = world.published();
    BOOST_TEST_MESSAGE("mariadbd SIGKILLed at " << at_crash << " of " << work.logical << " published");
    BOOST_TEST(at_crash < static_cast<long long>(work.logical), "the crash came mid-stream");
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the relay's attempts meet a closed port
    server.start();

    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_processed(static_cast<long long>(work.logical)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    const auto log = relay.log();
    BOOST_TEST((contains(log, "the connection to MariaDB was lost") || contains(log, "connecting to MariaDB")), log);
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work, mariadb_relay_threads * mariadb_relay_batch);
    BOOST_TEST(world.count("SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}
