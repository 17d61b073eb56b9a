// Null and empty are different things in Kafka (a null value is a compacted topic's tombstone, a
// null key spreads records over partitions): the source, the publisher and the dead-letter sink
// keep each key and value exactly as null, empty or bytes.
#define BOOST_TEST_MODULE kafka record fidelity
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "kafka/mock_cluster.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"
#include "seqinbox/kafka/publisher.hpp"
#include "seqinbox/kafka/source.hpp"
#include "support/print_record_bytes.hpp"

namespace si = seqinbox;
namespace kafka = seqinbox::kafka;
using namespace std::chrono_literals;
using si::testing::mock_cluster;

namespace {

const std::string topic = "orders";

/// Every combination of null, empty and non-empty key and value, told apart by an id header.
std::vector<si::envelope> null_and_empty_records() {
    const std::vector<std::optional<std::string>> choices = {std::nullopt, std::string(), std::string("x")};
    std::vector<si::envelope> records;
    for (const auto& key : choices)
        for (const auto& value : choices) {
            si::envelope e;
            e.key = key;
            e.value = value;
            e.headers = {{"idempotence-id", std::to_string(records.size())}};
            records.push_back(std::move(e));
        }
    return records;
}

/// Checks that `got` holds each of `sent` (matched by id header) with the same key and value.
void expect_same_keys_and_values(const std::vector<si::envelope>& sent, const std::vector<si::envelope>& got) {
    BOOST_TEST_REQUIRE(got.size() == sent.size());
    for (const auto& s : sent) {
        const auto id = s.find_header("idempotence-id");
        const auto match = std::ranges::find_if(got, [&](const si::envelope& g) { return g.find_header("idempotence-id") == id; });
        BOOST_TEST_REQUIRE((match != got.end()), "record " << *id << " missing");
        BOOST_TEST_CONTEXT("record " << *id) {
            BOOST_TEST(match->key == s.key);
            BOOST_TEST(match->value == s.value);
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_source_keeps_null_and_empty_keys_and_values_apart) {
    mock_cluster cluster;
    cluster.create_topic(topic, 1);
    const auto sent = null_and_empty_records();
    for (const auto& e : sent) cluster.produce(topic, e, 0);

    kafka::source_options options;
    options.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), "fidelity")}};
    kafka::source source(options, {{"", {topic}}});
    std::vector<si::envelope> got;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (got.size() < sent.size() && std::chrono::steady_clock::now() < deadline)
        if (auto e = source.poll()) {
            source.acknowledge(*e);
            got.push_back(std::move(*e));
        }
    source.close();
    expect_same_keys_and_values(sent, got);
}

BOOST_AUTO_TEST_CASE(the_publisher_produces_null_and_empty_keys_and_values_as_they_are) {
    mock_cluster cluster;
    cluster.create_topic(topic, 1);
    kafka::publisher publisher({.producer = si::testing::quiet_client(cluster.bootstraps()), .delivery_timeout = 10s});
    const auto sent = null_and_empty_records();
    for (const auto& e : sent) publisher.publish(topic, e, "any");
    expect_same_keys_and_values(sent, cluster.read_all(topic, 1, sent.size()));
}

BOOST_AUTO_TEST_CASE(a_publication_batch_keeps_its_records_and_their_order_and_await_names_a_refused_one) {
    mock_cluster cluster;
    cluster.create_topic(topic, 1);
    kafka::publisher publisher({.producer = si::testing::quiet_client(cluster.bootstraps()), .delivery_timeout = 10s});
    const auto sent = null_and_empty_records();
    kafka::publication_batch batch;
    for (const auto& e : sent) publisher.publish_later(batch, topic, e, "any");
    BOOST_TEST(batch.size() == sent.size());
    publisher.await(batch);
    BOOST_TEST(batch.size() == 0u);
    BOOST_TEST(publisher.statistics().published == sent.size());
    expect_same_keys_and_values(sent, cluster.read_all(topic, 1, sent.size()));

    rd_kafka_mock_push_request_errors(cluster.native(), 0 /* Produce */, 1, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    publisher.publish_later(batch, topic, sent.front(), "any");
    try {
        publisher.await(batch);
        BOOST_ERROR("a refused record was awaited without an error");
    } catch (const si::error& e) {
        BOOST_TEST(std::string(e.what()).find("delivering a record to 'orders'") != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("MSG_SIZE_TOO_LARGE") != std::string::npos, e.what());
    }
    BOOST_TEST(publisher.statistics().failed == 1u);
}

BOOST_AUTO_TEST_CASE(the_dead_letter_sink_produces_null_and_empty_keys_and_values_as_they_are) {
    mock_cluster cluster;
    cluster.create_topic(topic, 1);
    kafka::dead_letter_sink sink({.producer = si::testing::quiet_client(cluster.bootstraps()), .topic = topic, .delivery_timeout = 10s});
    const auto sent = null_and_empty_records();
    for (const auto& e : sent) sink.publish({.original = e, .reason = "test", .qualified_type = "T", .idempotence_id = "i", .context_id = ""});
    expect_same_keys_and_values(sent, cluster.read_all(topic, 1, sent.size()));
}
