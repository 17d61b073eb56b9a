// Bounded buffers (issue 38) through the relay, as a user runs it: `seqinbox run` as a child
// process on the mock cluster and a throwaway PostgreSQL, the order sequence declared with
// `maxWaiting: 2`. Three successors of one order arrive before its OrderCreated:
// dead-letter-newest sends the third to the dead-letter topic (failure kind buffer_overflow,
// counted on /metrics; a redrive publishes it after all), dead-letter-instance sends all three,
// reject retries the third until OrderCreated lets every message through in declared order.
#define BOOST_TEST_MODULE seqinbox relay buffers
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "postgresql/cli_runner.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

const std::string order = "order-1";
const std::string group = "relay-buffers";
/// The successors, in the order they arrive: each waits for OrderCreated alone.
const std::vector<std::string> successors = {"OrderValidated", "OrderPrepared", "OrderExpedited"};

std::string id_of(const std::string& type) { return type + "@" + order; }

/// The shared declaration with a buffer of two WAITING messages per order and `policy`.
void declare_buffer_of_two(const relay_world& world, const std::string& policy) {
    std::string yaml = declarations_yaml;
    const std::string retention = "    retentionPeriod: 24h\n";
    yaml.replace(yaml.find(retention), retention.size(), retention + "    maxWaiting: 2\n    overflowPolicy: " + policy + "\n");
    std::ofstream(world.dir / "orders.yaml") << yaml;
}

/// One record per type of `types`, all of `order` on input partition 0, in that order.
void produce(relay_world& world, const std::vector<std::string>& types) {
    for (const auto& type : types) world.cluster.produce(input, si::testing::record(type, id_of(type), order), 0);
}

/// The relay with one consumer thread (one thread decides an order anyway).
relay_process start_relay(const relay_world& world) { return relay_process(world.arguments(group, 1), world.dir / "relay.log"); }

/// The types the relay published, in output order (one order: one output partition).
std::vector<std::string> published_types(const relay_world& world) {
    std::vector<std::string> types;
    for (const auto& r : world.cluster.read_written(output, output_partitions)) types.push_back(header_of(r, "message-type"));
    return types;
}

/// What /metrics says about the overflows of the order sequence under `policy`.
std::string overflow_series(const std::string& policy) {
    return "seqinbox_buffer_overflows_total{sequence=\"OrderSequence\",policy=\"" + policy + "\"} ";
}

/// `seqinbox redrive` of the buffer_overflow dead letters back to the input topic.
cli_outcome redrive_overflows(const relay_world& world) {
    return run_cli("redrive --bootstrap-servers " + world.cluster.bootstraps() + " --from " + dead_letters + " --to " + input +
                   " --kind buffer_overflow --kafka-property log_level=0 --json");
}

}  // namespace

BOOST_AUTO_TEST_CASE(dead_letter_newest_dead_letters_the_third_successor_and_a_redrive_publishes_it) {
    relay_world world;
    world.cluster.create_topic(dead_letters + ".redriven", 1);  // the redrive's ledger
    declare_buffer_of_two(world, "dead-letter-newest");
    produce(world, successors);
    relay_process relay = start_relay(world);
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());

    const auto rejected = world.cluster.read_all(dead_letters, 1, 1, std::chrono::seconds(60));
    BOOST_TEST_REQUIRE(rejected.size() == 1u, relay.log());
    BOOST_TEST(header_of(rejected.front(), "idempotence-id") == id_of("OrderExpedited"), "the newest arrival");
    BOOST_TEST(header_of(rejected.front(), "seqinbox-failure-kind") == "buffer_overflow");
    BOOST_TEST(contains(header_of(rejected.front(), "seqinbox-reason"), "maxWaiting 2"), header_of(rejected.front(), "seqinbox-reason"));
    BOOST_TEST(contains(relay.log(), "buffer full: "), relay.log());
    const auto metrics = http_get(port, "/metrics").body;
    BOOST_TEST(contains(metrics, overflow_series("dead-letter-newest") + "1\n"), metrics);

    produce(world, {"OrderCreated"});
    BOOST_TEST_REQUIRE(world.wait_for_output(3, std::chrono::seconds(60)), relay.log());
    const auto redriven = redrive_overflows(world);
    BOOST_TEST(redriven.exit_code == 0, redriven.output);
    BOOST_TEST(contains(redriven.output, "\"copied\": 1"), redriven.output);
    BOOST_TEST_REQUIRE(world.wait_for_output(4, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    // The relay has exited: what its topics hold now is all it wrote.
    const std::vector<std::string> expected = {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited"};
    BOOST_TEST(published_types(world) == expected, relay.log());
    BOOST_TEST(world.cluster.end_offsets(dead_letters, 1).at(0) == 1, "nothing more dead-lettered");
}

BOOST_AUTO_TEST_CASE(dead_letter_instance_dead_letters_every_waiting_successor_with_the_arrival) {
    relay_world world;
    declare_buffer_of_two(world, "dead-letter-instance");
    produce(world, successors);
    relay_process relay = start_relay(world);
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());

    const auto rejected = world.cluster.read_all(dead_letters, 1, successors.size(), std::chrono::seconds(60));
    BOOST_TEST_REQUIRE(rejected.size() == successors.size(), relay.log());
    for (std::size_t i = 0; i < successors.size(); ++i) {
        BOOST_TEST(header_of(rejected[i], "idempotence-id") == id_of(successors[i]), "the waiting ones first, then the arrival");
        BOOST_TEST(header_of(rejected[i], "seqinbox-failure-kind") == "buffer_overflow");
    }
    const auto metrics = http_get(port, "/metrics").body;
    BOOST_TEST(contains(metrics, overflow_series("dead-letter-instance") + "1\n"), metrics);

    produce(world, {"OrderCreated"});
    BOOST_TEST_REQUIRE(world.wait_for_output(1, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST(published_types(world) == std::vector<std::string>{"OrderCreated"}, relay.log());
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'") == 0);
}

BOOST_AUTO_TEST_CASE(reject_retries_the_third_successor_until_the_predecessor_lets_all_four_through_in_order) {
    relay_world world;
    declare_buffer_of_two(world, "reject");
    const auto validated = run_cli("validate " + shell_quote((world.dir / "orders.yaml").string()));
    BOOST_TEST(contains(validated.output, "maxWaiting 2, reject"), validated.output);
    produce(world, successors);
    relay_process relay = start_relay(world);
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());

    // Rejected and given back, to come again after the relay's retry pause (one second) until
    // the predecessor is there: backpressure, not loss.
    BOOST_TEST_REQUIRE(wait_for_log(relay, "buffer full: ", std::chrono::seconds(60)), relay.log());
    BOOST_TEST(wait_for_log(relay, "the delivery is retried later", std::chrono::seconds(30)), relay.log());
    BOOST_TEST(await_health(port, 503).status == 503, relay.log());
    const auto metrics = http_get(port, "/metrics").body;
    BOOST_TEST(contains(metrics, overflow_series("reject")), metrics);
    BOOST_TEST(world.published() == 0);

    // On partition 0 behind the rejected record, as a producer keyed by order puts it: the
    // relay must decide it while the rejected record waits, not reject it with its batch again.
    produce(world, {"OrderCreated"});
    BOOST_TEST_REQUIRE(world.wait_for_output(4, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(await_health(port, 200).status == 200, relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const std::vector<std::string> expected = {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited"};
    BOOST_TEST(published_types(world) == expected, relay.log());
    BOOST_TEST(world.cluster.end_offsets(dead_letters, 1).at(0) == 0, "nothing is dead-lettered");
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}
