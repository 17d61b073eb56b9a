// The relay on batches (issue 19), as a user runs it: `seqinbox run` as a child process on the
// mock cluster and a throwaway PostgreSQL. A batch of out-of-order records comes out in declared
// order; a publish the broker refuses, or the producer refuses at once (too large), makes only its
// message FAILED (dead-lettered as publish_failed) while the rest of its batch is still published;
// bad batch options are refused naming the value. The relay is one group member whose poller
// routes each record to the consumer thread of its context: one thread decides all of a context.
#define BOOST_TEST_MODULE seqinbox relay batches
#include <boost/test/unit_test.hpp>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/kafka/publisher.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The relay's arguments with one consumer thread and the given batch options.
std::vector<std::string> batch_arguments(const relay_world& world, const std::string& size, const std::string& linger) {
    auto arguments = world.arguments("relay-batches", 1);
    arguments.insert(arguments.end(), {"--batch-size", size, "--batch-linger", linger});
    return arguments;
}

/// `count` order ids whose output partition is (`on` true) or is not (`on` false) `partition`.
std::vector<std::string> contexts_where(std::int32_t partition, bool on, std::size_t count) {
    std::vector<std::string> result;
    for (int i = 0; result.size() < count; ++i) {
        const std::string id = "order-" + std::to_string(i);
        if ((si::kafka::partition_for(id, output_partitions) == partition) == on) result.push_back(id);
    }
    return result;
}

/// Which consumer threads ("consumer 2") logged a decision about each context, from the
/// relay's decision lines ("... info consumer 2: processed OrderCreated/ID context C"). (No
/// std::regex: GCC 12 warns inside it under the sanitizers, and warnings are errors.)
std::map<std::string, std::set<std::string>> deciding_threads(const std::string& log) {
    std::map<std::string, std::set<std::string>> threads;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        const auto thread = line.find(" consumer ");
        const auto colon = thread == std::string::npos ? thread : line.find(": ", thread);
        const auto context = colon == std::string::npos ? colon : line.find(" context ", colon);
        if (context == std::string::npos) continue;
        const std::string what = line.substr(colon + 2, line.find(' ', colon + 2) - colon - 2);
        if (what != "processed" && what != "buffered" && what != "released" && what != "skipped") continue;
        const auto id_end = line.find(' ', context + 9);  // a duplicate's line goes on with its reason
        threads[line.substr(context + 9, id_end == std::string::npos ? id_end : id_end - context - 9)].insert(
            line.substr(thread + 1, colon - thread - 1));
    }
    return threads;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_context_whose_records_arrive_on_every_partition_is_decided_by_one_consumer_thread) {
    // Each record on a random partition, as independent producers spread them: a thread per
    // partition would decide every order, and its batches would wait for the other's instance locks.
    relay_world world;
    const si::testing::order_workload work(80, 0.2, 37);
    work.produce(world.cluster, input, input_partitions, 32, 0, work.records.size(), si::testing::placement::random_partition);
    relay_process relay(world.arguments("relay-members", 2), world.dir / "relay.log");
    BOOST_TEST_REQUIRE(world.wait_for_input_decided("relay-members", static_cast<long long>(work.logical)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const auto threads = deciding_threads(relay.log());
    BOOST_TEST(threads.size() == work.contexts.size(), relay.log());
    std::set<std::string> used;
    for (const auto& [context, deciders] : threads) {
        BOOST_TEST(deciders.size() == 1u, context << " was decided by " << deciders.size() << " consumer threads");
        used.insert(deciders.begin(), deciders.end());
    }
    BOOST_TEST(used == (std::set<std::string>{"consumer 1", "consumer 2"}), "both threads decide: " << used.size());
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work);
}

BOOST_AUTO_TEST_CASE(a_batch_of_out_of_order_duplicated_records_is_published_once_in_declared_order) {
    relay_world world;
    const si::testing::order_workload work(80, 0.2, 31);
    work.produce(world.cluster, input, input_partitions, 32);
    relay_process relay(batch_arguments(world, "100", "200ms"), world.dir / "relay.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST(contains(relay.log(), "batches of up to 100 records"), relay.log());
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}

BOOST_AUTO_TEST_CASE(a_refused_publish_makes_only_its_message_failed_and_the_rest_of_its_batch_is_published) {
    relay_world world;
    // Output partition 2 alone is led by broker 2, whose next two produce requests are refused:
    // the batch's, then the doomed message's own when the batch is decided one record at a time.
    constexpr std::int32_t doomed_partition = 2;
    for (std::int32_t p = 0; p < output_partitions; ++p)
        rd_kafka_mock_partition_set_leader(world.cluster.native(), output.c_str(), p, p == doomed_partition ? 2 : 1);
    rd_kafka_mock_partition_set_leader(world.cluster.native(), dead_letters.c_str(), 0, 1);
    const auto doomed = contexts_where(doomed_partition, true, 1).front();
    const auto others = contexts_where(doomed_partition, false, 6);
    for (const auto& context : others) world.cluster.produce(input, si::testing::record("OrderCreated", "c@" + context, context), 0);
    world.cluster.produce(input, si::testing::record("OrderCreated", "c@" + doomed, doomed), 0);
    constexpr int produce_request = 0;
    BOOST_TEST_REQUIRE(!rd_kafka_mock_broker_push_request_error_rtts(world.cluster.native(), 2, produce_request, 2,
                                                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, 0,
                                                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, 0));

    relay_process relay(batch_arguments(world, "100", "500ms"), world.dir / "relay.log");
    const std::string decided = "SELECT count(*) FROM sequenced_message WHERE state IN ('PROCESSED', 'FAILED')";
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, decided, static_cast<long long>(others.size() + 1)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'FAILED' AND idempotence_id = 'c@" + doomed +
                                         "'") == 1);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") ==
               static_cast<long long>(others.size()));
    // The relay has exited: what its topics hold now is all it wrote (read_written()).
    const auto rejected = world.cluster.read_written(dead_letters, 1);
    BOOST_TEST_REQUIRE(rejected.size() == 1u, relay.log());
    BOOST_TEST(std::string(rejected.front().find_header("idempotence-id").value_or("")) == "c@" + doomed);
    BOOST_TEST(std::string(rejected.front().find_header("seqinbox-failure-kind").value_or("")) == "publish_failed");
    std::set<std::string> published;
    for (const auto& r : world.cluster.read_written(output, output_partitions))
        published.insert(r.key.value_or(""));
    BOOST_TEST(published == std::set<std::string>(others.begin(), others.end()), "every other message published, the doomed one not");
}

BOOST_AUTO_TEST_CASE(a_record_too_large_to_publish_fails_its_message_as_publish_failed_and_the_rest_of_its_batch_is_published) {
    relay_world world;
    // The mock takes the record; the relay's producer (message.max.bytes 1,000,000) refuses its
    // publication at once, inside the batch, before any delivery report.
    const std::string megabyte(1000000, 'x');
    const auto before = contexts_where(0, true, 3), after = contexts_where(0, false, 3);  // six distinct orders
    const std::string big = "order-big";
    for (const auto& context : before) world.cluster.produce(input, si::testing::record("OrderCreated", "c@" + context, context), 0);
    world.cluster.produce(input, si::testing::record("OrderCreated", "c@" + big, big, megabyte), 0);
    for (const auto& context : after) world.cluster.produce(input, si::testing::record("OrderCreated", "c@" + context, context), 0);

    relay_process relay(batch_arguments(world, "100", "500ms"), world.dir / "relay.log");
    const std::string decided = "SELECT count(*) FROM sequenced_message WHERE state IN ('PROCESSED', 'FAILED')";
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, decided, static_cast<long long>(before.size() + after.size() + 1)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'FAILED' AND idempotence_id = 'c@" + big + "'") == 1);
    const auto rejected = world.cluster.read_written(dead_letters, 1);  // the relay has exited: all it wrote
    BOOST_TEST_REQUIRE(rejected.size() == 1u, relay.log());
    BOOST_TEST(std::string(rejected.front().find_header("idempotence-id").value_or("")) == "c@" + big);
    BOOST_TEST(std::string(rejected.front().find_header("seqinbox-failure-kind").value_or("")) == "publish_failed",
               "what `seqinbox redrive --kind publish_failed` selects; reason: " << rejected.front().find_header("seqinbox-reason").value_or(""));
    BOOST_TEST(contains(std::string(rejected.front().find_header("seqinbox-reason").value_or("")), "MSG_SIZE_TOO_LARGE"));
    std::set<std::string> published;
    for (const auto& r : world.cluster.read_written(output, output_partitions)) published.insert(r.key.value_or(""));
    std::set<std::string> expected(before.begin(), before.end());
    expected.insert(after.begin(), after.end());
    BOOST_TEST(published == expected, "every other message of the batch published, the big one not");
}

BOOST_AUTO_TEST_CASE(bad_batch_options_are_refused_naming_the_value) {
    relay_world world;
    relay_process zero(batch_arguments(world, "0", "5ms"), world.dir / "zero.log");
    BOOST_TEST(zero.wait(std::chrono::seconds(30)) == 2);
    BOOST_TEST(contains(zero.log(), "option '--batch-size' expects a whole number from 1 to 100000, not '0'"), zero.log());
    relay_process word(batch_arguments(world, "100", "soon"), world.dir / "word.log");
    BOOST_TEST(word.wait(std::chrono::seconds(30)) == 2);
    BOOST_TEST(contains(word.log(), "option '--batch-linger' expects a duration"), word.log());
    BOOST_TEST(contains(word.log(), "not 'soon'"), word.log());
    relay_process long_linger(batch_arguments(world, "100", "1m"), world.dir / "long.log");
    BOOST_TEST(long_linger.wait(std::chrono::seconds(30)) == 1);
    BOOST_TEST(contains(long_linger.log(), "batch_linger = 60000 ms is out of range (0 to 10000 ms)"), long_linger.log());
}
