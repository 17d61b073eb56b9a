// The dead-letter error sink against librdkafka's mock cluster: what a record carries, concurrent
// publishers, brokers going down and coming back, configuration mistakes.
#define BOOST_TEST_MODULE kafka_dead_letter_sink
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "mock_cluster.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"
#include "support/print_record_bytes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using seqinbox::error;
using seqinbox::error_category;
using seqinbox::failed_delivery;
using seqinbox::kafka::dead_letter_options;
using seqinbox::kafka::dead_letter_sink;
namespace header_name = seqinbox::kafka::dead_letter_header;

const std::string dlq = "orders.dlq";

dead_letter_options options_for(const seqinbox::testing::mock_cluster& cluster, std::chrono::milliseconds timeout = 10s) {
    auto producer = seqinbox::testing::quiet_client(cluster.bootstraps());
    // Reconnect quickly once brokers come back, instead of backing off up to 10 s.
    producer.insert({{"reconnect.backoff.ms", "50"}, {"reconnect.backoff.max.ms", "200"}});
    return {.producer = producer, .topic = dlq, .delivery_timeout = timeout, .cluster_name = "dlq-cluster"};
}

failed_delivery failure(const std::string& idempotence_id, std::string key = "order-7", std::string value = "{\"total\":12}") {
    seqinbox::envelope original{.key = std::move(key),
                                .value = std::move(value),
                                .headers = {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                                            {"type", "OrderPlaced"}},
                                .topic = "orders",
                                .partition = 2,
                                .offset = 4711,
                                .time = {},
                                .cluster = "main"};
    return {.original = std::move(original),
            .reason = "listener threw: stock service unavailable",
            .qualified_type = "OrderPlaced",
            .idempotence_id = idempotence_id,
            .context_id = "customer-42",
            .kind = seqinbox::failure_kind::publish_failed};
}

std::string header_value(const seqinbox::envelope& record, std::string_view name) {
    const auto value = record.find_header(name);
    BOOST_TEST_REQUIRE(value.has_value(), "header " << name << " missing");
    return std::string(*value);
}

/// The failure headers of `record` name `f`.
void expect_failure_headers(const seqinbox::envelope& record, const failed_delivery& f) {
    BOOST_TEST(header_value(record, header_name::reason) == f.reason);
    BOOST_TEST(header_value(record, header_name::kind) == std::string(seqinbox::to_string(f.kind)));
    BOOST_TEST(header_value(record, header_name::kind) == "publish_failed");
    BOOST_TEST(header_value(record, header_name::qualified_type) == f.qualified_type);
    BOOST_TEST(header_value(record, header_name::idempotence_id) == f.idempotence_id);
    BOOST_TEST(header_value(record, header_name::context_id) == f.context_id);
    BOOST_TEST(header_value(record, header_name::original_topic) == f.original.topic);
    BOOST_TEST(header_value(record, header_name::original_partition) == std::to_string(f.original.partition));
    BOOST_TEST(header_value(record, header_name::original_offset) == std::to_string(f.original.offset));
    BOOST_TEST(header_value(record, header_name::original_cluster) == f.original.cluster);
}

/// Options whose producer refuses records above 20,000 bytes.
dead_letter_options small_records_only(const seqinbox::testing::mock_cluster& cluster) {
    auto options = options_for(cluster);
    options.producer["message.max.bytes"] = "20000";
    return options;
}

/// True when `e` has `category` and its message names every one of `words`.
auto configuration_error_naming(std::vector<std::string> words) {
    return [words = std::move(words)](const error& e) {
        const std::string text = e.what();
        BOOST_TEST_MESSAGE("configuration error: " << text);
        return e.category() == error_category::configuration &&
               std::ranges::all_of(words, [&](const std::string& w) { return text.find(w) != std::string::npos; });
    };
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_published_failure_carries_the_original_record_and_names_the_failure) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster));
    const auto f = failure("id-1");

    sink.publish(f);

    const auto records = cluster.read_all(dlq, 1, 1);
    BOOST_TEST_REQUIRE(records.size() == 1u);
    const auto& record = records.front();
    BOOST_TEST(record.key == f.original.key);
    BOOST_TEST(record.value == f.original.value);
    BOOST_TEST_REQUIRE(record.headers.size() == f.original.headers.size() + 9);  // the failure headers, the kind among them
    BOOST_TEST(std::equal(f.original.headers.begin(), f.original.headers.end(), record.headers.begin()),
               "the original headers come first, in order");
    expect_failure_headers(record, f);
    BOOST_TEST(header_value(record, header_name::original_offset) == "4711");
    BOOST_TEST(!record.find_header(header_name::omitted).has_value());
    BOOST_TEST(sink.statistics().published == 1u);
    BOOST_TEST(sink.statistics().failed == 0u);
}

BOOST_AUTO_TEST_CASE(nul_and_binary_bytes_in_key_value_and_headers_survive) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster));
    const auto key = "k\0ey\xff\x80"s;
    const auto value = "\0\x01\x02\xfe\xff value \0"s;
    auto f = failure("id-binary", key, value);
    f.original.headers.push_back({"blob", "\0\xc3\x28"s});
    f.qualified_type.clear();  // an unresolvable type travels as an empty header

    sink.publish(f);

    const auto records = cluster.read_all(dlq, 1, 1);
    BOOST_TEST_REQUIRE(records.size() == 1u);
    BOOST_TEST(records.front().key == key);
    BOOST_TEST(records.front().value == value);
    BOOST_TEST(header_value(records.front(), "blob") == "\0\xc3\x28"s);
    BOOST_TEST(header_value(records.front(), header_name::qualified_type).empty());
}

BOOST_AUTO_TEST_CASE(concurrent_publishers_each_land_exactly_once) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 3);
    dead_letter_sink sink(options_for(cluster));
    constexpr int threads = 4;
    constexpr int per_thread = 25;

    std::vector<std::jthread> publishers;
    for (int t = 0; t < threads; ++t)
        publishers.emplace_back([&sink, t] {
            for (int i = 0; i < per_thread; ++i) {
                const auto id = std::to_string(t) + "-" + std::to_string(i);
                sink.publish(failure(id, "key-" + id));
            }
        });
    publishers.clear();  // joins

    const auto records = cluster.read_all(dlq, 3, threads * per_thread);
    std::map<std::string, int> seen;
    for (const auto& r : records) ++seen[header_value(r, header_name::idempotence_id)];
    BOOST_TEST(records.size() == std::size_t{threads * per_thread});
    BOOST_TEST(seen.size() == std::size_t{threads * per_thread});
    BOOST_TEST(std::ranges::all_of(seen, [](const auto& entry) { return entry.second == 1; }));
    BOOST_TEST(sink.statistics().published == std::uint64_t{threads * per_thread});
}

BOOST_AUTO_TEST_CASE(brokers_down_make_publish_throw_in_time_and_it_works_again_once_they_are_up) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster, 2s));
    sink.publish(failure("before"));  // connected, producer id acquired

    rd_kafka_mock_broker_set_down(cluster.native(), -1);
    const auto start = std::chrono::steady_clock::now();
    BOOST_CHECK_EXCEPTION(sink.publish(failure("while-down")), error,
                          [](const error& e) {
                              BOOST_TEST_MESSAGE("publish with brokers down: " << e.what());
                              return e.category() == error_category::retryable;
                          });
    const auto waited = std::chrono::steady_clock::now() - start;
    BOOST_TEST_MESSAGE("publish with brokers down threw after "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
    BOOST_TEST(waited < 4s, "bounded by delivery_timeout plus librdkafka's one-second expiry scan");
    BOOST_TEST(sink.statistics().failed == 1u);

    rd_kafka_mock_broker_set_up(cluster.native(), -1);
    // The engine retries a delivery whose publish threw; do the same while the client reconnects.
    bool published = false;
    for (int attempt = 0; attempt < 5 && !published; ++attempt) {
        try {
            sink.publish(failure("after"));
            published = true;
        } catch (const error& e) {
            BOOST_TEST_MESSAGE("attempt " << attempt << " after brokers came back: " << e.what());
            BOOST_TEST_REQUIRE(to_string(e.category()) == "retryable");
        }
    }
    BOOST_TEST_REQUIRE(published);

    std::map<std::string, int> seen;
    for (const auto& r : cluster.read_all(dlq, 1, 2, 5s)) ++seen[header_value(r, header_name::idempotence_id)];
    BOOST_TEST(seen["before"] == 1);
    BOOST_TEST(seen["after"] >= 1);  // a timed-out attempt may also have landed: at-least-once
}

BOOST_AUTO_TEST_CASE(transient_produce_errors_are_retried_by_the_idempotent_producer_without_duplicates) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster));
    sink.publish(failure("warm-up"));
    constexpr int produce_request = 0;
    rd_kafka_mock_push_request_errors(cluster.native(), produce_request, 3, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                                      RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT);

    sink.publish(failure("retried"));

    const auto records = cluster.read_all(dlq, 1, 2, 5s);
    BOOST_TEST_REQUIRE(records.size() == 2u);
    BOOST_TEST(header_value(records.back(), header_name::idempotence_id) == "retried");
}

BOOST_AUTO_TEST_CASE(a_record_too_large_for_the_producer_lands_without_its_value_and_headers_say_so) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(small_records_only(cluster));
    const auto f = failure("id-big", "order-7", std::string(50000, 'x'));

    sink.publish(f);

    const auto records = cluster.read_all(dlq, 1, 1);
    BOOST_TEST_REQUIRE(records.size() == 1u);
    const auto& record = records.front();
    BOOST_TEST(record.value == seqinbox::record_bytes(""), "left out: empty, not null (a tombstone on a compacted topic)");
    BOOST_TEST(record.key == f.original.key, "the key fits, so it is kept");
    BOOST_TEST(std::equal(f.original.headers.begin(), f.original.headers.end(), record.headers.begin()),
               "the original headers fit, so they are kept, first and in order");
    BOOST_TEST(header_value(record, header_name::omitted) == "value");
    BOOST_TEST(header_value(record, header_name::original_value_size) == "50000");
    expect_failure_headers(record, f);
    BOOST_TEST(sink.statistics().published == 1u);
    BOOST_TEST(sink.statistics().failed == 0u);
}

BOOST_AUTO_TEST_CASE(a_record_whose_key_and_headers_are_too_large_as_well_lands_with_the_failure_headers_only) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(small_records_only(cluster));
    auto f = failure("id-bulky", std::string(15000, 'k'), std::string(50000, 'x'));
    f.original.headers.push_back({"bulky", std::string(15000, 'h')});

    sink.publish(f);

    const auto records = cluster.read_all(dlq, 1, 1);
    BOOST_TEST_REQUIRE(records.size() == 1u);
    const auto& record = records.front();
    BOOST_TEST(!record.key.has_value());
    BOOST_TEST(record.value == seqinbox::record_bytes(""));
    BOOST_TEST(!record.find_header("bulky").has_value());
    BOOST_TEST(!record.find_header("traceparent").has_value());
    BOOST_TEST(header_value(record, header_name::omitted) == "value,key,headers");
    BOOST_TEST(header_value(record, header_name::original_value_size) == "50000");
    expect_failure_headers(record, f);
}

BOOST_AUTO_TEST_CASE(a_record_the_broker_refuses_as_too_large_lands_without_its_value) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster, 3s));
    sink.publish(failure("warm-up"));
    constexpr int produce_request = 0;
    rd_kafka_mock_push_request_errors(cluster.native(), produce_request, 1, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);

    sink.publish(failure("refused-whole"));

    const auto records = cluster.read_all(dlq, 1, 2, 5s);
    BOOST_TEST_REQUIRE(records.size() == 2u);
    BOOST_TEST(header_value(records.back(), header_name::idempotence_id) == "refused-whole");
    BOOST_TEST(header_value(records.back(), header_name::omitted) == "value");
    BOOST_TEST(sink.statistics().published == 2u);
}

BOOST_AUTO_TEST_CASE(a_record_refused_even_without_value_key_and_headers_throws_naming_it_and_the_sink_stays_usable) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 1);
    dead_letter_sink sink(options_for(cluster, 3s));
    sink.publish(failure("warm-up"));
    constexpr int produce_request = 0;
    rd_kafka_mock_push_request_errors(cluster.native(), produce_request, 3, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);

    BOOST_CHECK_EXCEPTION(sink.publish(failure("refused")), error, [](const error& e) {
        BOOST_TEST_MESSAGE("refused record: " << e.what());
        const std::string_view text = e.what();
        return e.category() == error_category::configuration && text.find("MSG_SIZE_TOO_LARGE") != std::string_view::npos &&
               text.find("orders[2]@4711") != std::string_view::npos && text.find("without its value") != std::string_view::npos;
    });
    BOOST_TEST(sink.statistics().failed == 1u);

    sink.publish(failure("next"));
    BOOST_TEST(sink.statistics().published == 2u);
}

BOOST_AUTO_TEST_CASE(partitions_names_a_missing_dead_letter_topic) {
    seqinbox::testing::mock_cluster cluster;
    cluster.create_topic(dlq, 3);
    BOOST_TEST(dead_letter_sink(options_for(cluster)).partitions() == 3);

    auto options = options_for(cluster);
    options.topic = "no-such-dlq";
    dead_letter_sink missing(options);
    BOOST_CHECK_EXCEPTION(missing.partitions(), error, configuration_error_naming({"'no-such-dlq'", "does not exist"}));
}

BOOST_AUTO_TEST_CASE(conflicting_idempotence_settings_are_configuration_errors_naming_them) {
    seqinbox::testing::mock_cluster cluster;
    auto options = options_for(cluster);
    options.producer["enable.idempotence"] = "false";
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"enable.idempotence", "'false'"}));

    options = options_for(cluster);
    options.producer["acks"] = "1";
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"acks", "'1'"}));

    options = options_for(cluster);
    options.producer["message.timeout.ms"] = "500";
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"message.timeout.ms", "'500'"}));

    options = options_for(cluster);
    options.producer["acks"] = "all";
    options.producer["enable.idempotence"] = "true";
    BOOST_CHECK_NO_THROW(dead_letter_sink{options});
}

BOOST_AUTO_TEST_CASE(missing_or_unknown_settings_are_configuration_errors_naming_them) {
    seqinbox::testing::mock_cluster cluster;
    auto options = options_for(cluster);
    options.producer.erase("bootstrap.servers");
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"bootstrap.servers"}));

    options = options_for(cluster);
    options.topic.clear();
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"topic"}));

    options = options_for(cluster);
    options.producer["no.such.property"] = "42";
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"no.such.property", "'42'"}));

    options = options_for(cluster, 0ms);
    BOOST_CHECK_EXCEPTION(dead_letter_sink{options}, error, configuration_error_naming({"delivery_timeout"}));
}
