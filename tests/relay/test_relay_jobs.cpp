// The relay's two jobs under a long housekeeping run (issue 34): an operator action requested
// meanwhile runs within seconds, and SIGTERM stops the relay within seconds, not after the run.
// The run is made long by pacing: hundreds of expired instances, one per batch, at a work share
// of 1 % (each batch is followed by a pause of 99 times its duration).
#define BOOST_TEST_MODULE seqinbox relay jobs
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "kafka/kafka_world.hpp"
#include "postgresql/cli_runner.hpp"
#include "postgresql/pg_test_support.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using namespace seqinbox::test;

namespace {

constexpr int expired_instances = 600;

/// `n` OPEN instances of OrderSequence past their retention, without messages.
void insert_expired_instances(const std::string& conninfo, int n) {
    soci::session db(soci::postgresql, conninfo);
    db << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)"
          " SELECT 'OrderSequence', 'expired-' || i, 'OPEN', now() - interval '3 days', now() - interval '2 days'"
          " FROM generate_series(1, " + std::to_string(n) + ") AS i";
}

/// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_action_runs_and_a_stop_takes_effect_within_seconds_during_a_long_housekeeping_run) {
    relay_world world;
    insert_expired_instances(world.conninfo, expired_instances);
    auto arguments = world.arguments();  // actions every 200 ms, housekeeping every 1 s
    for (auto& a : arguments)
        if (a == "1h") a = "0s";  // --removal-delay: removed in the run that marks them
    arguments.insert(arguments.end(), {"--housekeeping-batch-size", "1", "--work-share", "1"});
    relay_process relay(arguments, world.dir / "relay.log");
    BOOST_TEST_REQUIRE(relay.http_port() != 0, relay.log());

    world.cluster.produce(input, si::testing::record("OrderShipped", "s2", "o2"));  // waits for its predecessors
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE idempotence_id = 's2'", 1), relay.log());
    const std::string marked = "SELECT count(*) FROM sequence_instance WHERE remove_after IS NOT NULL";
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, marked, 3), "housekeeping is marking\n" << relay.log());

    pg::store store({.conninfo = world.conninfo, .pool_size = 1});
    const auto id = count(world.conninfo, "SELECT id FROM sequenced_message WHERE idempotence_id = 's2'");
    const auto requested = std::chrono::steady_clock::now();
    BOOST_TEST_REQUIRE(si::accepted(store.request_message_action(id, si::message_action::consume, std::chrono::system_clock::now())));
    const bool published = world.wait_for_output(1, std::chrono::seconds(15));
    BOOST_TEST(published, "the CONSUME ran " << seconds_since(requested) << " s after the request (the old relay: after the run)");
    BOOST_TEST_MESSAGE("CONSUME published after " << seconds_since(requested) << " s");

    const auto left = count(world.conninfo, "SELECT count(*) FROM sequence_instance WHERE name = 'OrderSequence' AND context_id LIKE 'expired-%'");
    BOOST_TEST_REQUIRE(left > 0, "housekeeping still has work when the stop comes");
    const auto stopping = std::chrono::steady_clock::now();
    const int exit_code = relay.stop(SIGTERM, std::chrono::seconds(20));
    BOOST_TEST(exit_code == 0, "exit code " << exit_code << " (-1: still running after 20 s)\n" << relay.log());
    BOOST_TEST_MESSAGE("stopped " << seconds_since(stopping) << " s after SIGTERM, " << left << " expired instances left");
    BOOST_TEST(si::test::contains(relay.log(), "(stopped early by the relay's stop"),
               "the run's report says it was cut short\n" << relay.log());
}
