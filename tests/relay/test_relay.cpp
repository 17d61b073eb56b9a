// `seqinbox run` (the relay) and `seqinbox housekeep --once` as a user runs them: the real
// program as a child process, against librdkafka's mock cluster and a throwaway PostgreSQL.
// Out-of-order, duplicated input becomes in-order output once per logical message; SIGTERM
// mid-stream then a restart loses and repeats nothing; database outages under four consumer
// threads lose nothing; a cooperative member SIGTERMed before its first assignment exits 0;
// /metrics and /healthz answer; expired instances' WAITING messages reach the dead-letter topic
// before removal.
#define BOOST_TEST_MODULE seqinbox relay
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kafka/kafka_world.hpp"
#include "postgresql/cli_runner.hpp"
#include "postgresql/pg_test_support.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/inbox.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/order_check.hpp"
#include "support/iso_utc_time.hpp"
#include "support/print_record_bytes.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using namespace seqinbox::test;

namespace {

struct manual_clock_policies : si::default_policies {
    using clock = si::clock::manual_clock;
};

/// Stores `type` WAITING for its predecessors in an instance of `context` created two days ago,
/// so past its 24 h retention.
void buffer_in_expired_instance(const std::string& conninfo, const std::string& type, const std::string& id, const std::string& context) {
    pg::store store({.conninfo = conninfo, .pool_size = 2});
    si::memory::source source;
    si::memory::error_sink sink;
    si::clock::manual_clock clock(std::chrono::system_clock::now() - std::chrono::hours(48));
    pg::inbox<si::memory::source, si::memory::error_sink, manual_clock_policies> inbox(store, source, sink, si::testing::order_declarations(),
                                                                                       {.clock = clock});
    for (const auto& m : inbox.declared().sequences.front().messages) inbox.on(m.qualified_type(), [](auto&&, auto&&) {});
    BOOST_TEST_REQUIRE(to_string(inbox.deliver(si::testing::record(type, id, context)).outcome) == "buffered");
}

}  // namespace

BOOST_AUTO_TEST_CASE(out_of_order_duplicated_input_is_published_once_in_declared_order_with_metrics_and_health) {
    relay_world world;
    const si::testing::order_workload work(60, 0.3, 21);
    work.produce(world.cluster, input, input_partitions, 5);
    si::envelope poison = si::testing::record("OrderCreated", "p1", "order-poison");
    poison.headers.erase(poison.headers.begin());  // no message-type header: a bad message
    world.cluster.produce(input, poison);

    relay_process relay(world.arguments(), world.dir / "relay.log");
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), relay.log());

    const auto health = si::test::http_get(port, "/healthz");
    BOOST_TEST(health.status == 200, health.body);
    BOOST_TEST(health.body == "ok\n");
    const auto metrics = si::test::http_get(port, "/metrics");
    BOOST_TEST(metrics.status == 200);
    BOOST_TEST(si::test::contains(metrics.head, "text/plain; version=0.0.4"));
    for (const char* type : {"OrderCreated", "OrderValidated", "OrderShipped"})
        BOOST_TEST(si::test::contains(metrics.body, "seqinbox_consumed_messages_total{type=\"" + std::string(type) + "\"} 60"),
                   metrics.body);
    BOOST_TEST(si::test::contains(metrics.body, "seqinbox_waiting_messages"));
    BOOST_TEST(si::test::http_get(port, "/nope").status == 404);
    // without a view token the probes, like the API, answer only requests addressed to a loopback name
    for (const std::string path : {"/healthz", "/metrics"}) {
        const auto rebound = si::test::http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: rebound.example:9464\r\n\r\n", std::chrono::seconds(10));
        BOOST_TEST(rebound.status == 421, path << ": " << rebound.status);
        const auto local = si::test::http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: localhost:" + std::to_string(port) + "\r\n\r\n", std::chrono::seconds(10));
        BOOST_TEST(local.status == 200, path << ": " << local.status);
    }

    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    const auto log = relay.log();
    BOOST_TEST((si::test::contains(log, "info consumer 1: processed OrderCreated") ||
                si::test::contains(log, "info consumer 2: processed OrderCreated")),
               "a line per decision, naming the consumer thread");
    BOOST_TEST(si::test::contains(log, "info relay stopped"));
    // The relay has exited: what its topics hold now is all it wrote (read_written()).
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work);
    const auto rejected = world.cluster.read_written(dead_letters, 1);
    BOOST_TEST_REQUIRE(rejected.size() == 1u, "the bad message, and only it, is dead-lettered");
    BOOST_TEST(rejected.front().value == poison.value);
    BOOST_TEST(si::test::contains(std::string(rejected.front().find_header("seqinbox-reason").value_or("")), "message-type"));
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
}

BOOST_AUTO_TEST_CASE(sigterm_mid_stream_then_a_restart_loses_and_repeats_nothing) {
    relay_world world;
    const si::testing::order_workload work(150, 0.3, 22);
    const auto half = work.records.size() / 2;
    work.produce(world.cluster, input, input_partitions, 6, 0, half);

    relay_process first(world.arguments(), world.dir / "first.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(40), first.log());
    work.produce(world.cluster, input, input_partitions, 7, half);
    BOOST_TEST_REQUIRE(first.stop(SIGTERM) == 0, first.log());
    const auto after_first = world.published();
    BOOST_TEST_MESSAGE("published before SIGTERM took effect: " << after_first << " of " << work.logical);
    BOOST_TEST(after_first < static_cast<long long>(work.logical), "the stop came mid-stream");

    relay_process second(world.arguments(), world.dir / "second.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(static_cast<long long>(work.logical)), second.log());
    BOOST_TEST(second.stop(SIGINT) == 0, second.log());
    expect_in_declared_order(world.cluster.read_written(output, output_partitions), work);
    BOOST_TEST(si::test::contains(second.log(), "skipped duplicate"), "records after the last commit came again and were skipped");
}

BOOST_AUTO_TEST_CASE(a_crash_mid_stream_repeats_at_most_one_batch_per_consumer_thread_and_loses_nothing) {
    relay_world world;
    const si::testing::order_workload work(100, 0.3, 23);
    work.produce(world.cluster, input, input_partitions, 8);
    auto arguments = world.arguments();
    arguments.insert(arguments.end(), {"--batch-size", "5"});
    relay_process first(arguments, world.dir / "first.log");
    BOOST_TEST_REQUIRE(world.wait_for_output(40), first.log());
    BOOST_TEST_REQUIRE(first.stop(SIGKILL) == 128 + SIGKILL);
    BOOST_TEST_MESSAGE("published before the crash: " << world.published() << " of " << work.logical);

    // The group gives the dead member's partitions away after session.timeout.ms (6 s).
    relay_process second(world.arguments(), world.dir / "second.log");
    const std::string processed = "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'";
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, processed, static_cast<long long>(work.logical)), second.log());
    BOOST_TEST(second.stop(SIGTERM) == 0, second.log());
    // The at-least-once window of docs/guarantees.md: listeners (the publishes) done, their PROCESSED rows
    // not yet committed — at most one batch per consumer thread (--threads 2, --batch-size 5), each
    // record with the successors its release pass replayed (at most 4 messages per context).
    // Both relays have exited (the first one's last produce requests were handled while the
    // second one ran): the output topic holds all they wrote.
    const auto records = world.cluster.read_written(output, output_partitions);
    expect_in_declared_order(records, work, 2 * 5 * 4);
}

BOOST_AUTO_TEST_CASE(a_database_outage_under_four_consumer_threads_loses_nothing) {
    // Every consumer thread fails at once, five times mid-stream: each hands its record back for
    // redelivery. A record skipped then would leave its successors WAITING for good.
    relay_world world;
    const si::testing::order_workload work(800, 0.1, 24);
    work.produce(world.cluster, input, input_partitions, 9);
    const std::string group = "relay-outage";
    relay_process relay(world.arguments(group, 4), world.dir / "relay.log");
    const auto logical = static_cast<long long>(work.logical);
    constexpr int outages = 5;
    const std::string relay_connections =
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()";
    for (int outage = 1; outage <= outages; ++outage) {
        BOOST_TEST_REQUIRE(world.wait_for_output(logical * outage / (outages + 2)), relay.log());
        // Batches can pass two thresholds at once: end connections only once the relay has
        // reconnected since the last outage, or there is nothing to end.
        BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, relay_connections, 1), relay.log());
        BOOST_TEST(world.terminate_connections() > 0, "outage " << outage << " ended the relay's connections");
    }
    BOOST_TEST_MESSAGE("published when the last outage began: " << world.published() << " of " << logical);

    BOOST_TEST_REQUIRE(world.wait_for_input_decided(group, logical), "the relay committed the end of its input within 120 s\n" << relay.log());
    const std::string processed = "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'";
    const auto waiting = count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'");
    BOOST_TEST(waiting == 0, waiting << " messages WAITING for predecessors that never came again");
    BOOST_TEST(count(world.conninfo, processed) == logical);
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const auto records = world.cluster.read_written(output, output_partitions);  // the relay has exited: all it wrote
    expect_in_declared_order(records, work, records.size());  // at least once: an outage may repeat a publish
    BOOST_TEST(world.cluster.end_offsets(dead_letters, 1).at(0) == 0, "nothing is dead-lettered");  // the relay has exited
}

/// `log` without librdkafka's debug lines (they start with "%7|").
std::string without_debug_lines(const std::string& log) {
    std::istringstream lines(log);
    std::string kept;
    for (std::string line; std::getline(lines, line);)
        if (!line.starts_with("%7|")) kept += line + '\n';
    return kept;
}

BOOST_AUTO_TEST_CASE(sigterm_between_join_and_first_assignment_of_a_cooperative_member_exits_0) {
    // librdkafka before 2.3.0 asserts when it destroys a cooperative-sticky member that joined
    // its group but has no assignment yet. The mock delays each SyncGroup reply (which carries
    // the assignment) by 2 s, and each member is stopped after its JoinGroup reply, in that gap.
    // One consumer thread each: a relay's threads are members of their own, and a second one
    // would join after the delayed SyncGroup and may be assigned before the stop.
    relay_world world;
    constexpr int members = 6;
    constexpr std::int16_t sync_group = 14;
    std::mt19937 rng(25);
    std::vector<std::unique_ptr<relay_process>> started;
    for (int m = 0; m < members; ++m) {
        const std::string group = "relay-cooperative-" + std::to_string(m);
        BOOST_TEST_REQUIRE(!rd_kafka_mock_coordinator_set(world.cluster.native(), "group", group.c_str(), 1));
        BOOST_TEST_REQUIRE(
            !rd_kafka_mock_broker_push_request_error_rtts(world.cluster.native(), 1, sync_group, 1, RD_KAFKA_RESP_ERR_NO_ERROR, 2000));
        auto arguments = world.arguments(group, 1);
        for (const char* property : {"partition.assignment.strategy=cooperative-sticky", "debug=cgrp", "log_level=7"})
            arguments.insert(arguments.end(), {"--consumer-property", property});
        started.push_back(std::make_unique<relay_process>(arguments, world.dir / (group + ".log")));
    }
    std::vector<int> exit_codes(members, -1);
    {
        std::vector<std::jthread> stoppers;  // each member is stopped in its own gap
        for (int m = 0; m < members; ++m)
            stoppers.emplace_back([&, m, pause = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng))] {
                if (!wait_for_log(*started[m], "-> wait-sync")) return;
                std::this_thread::sleep_for(pause);
                exit_codes[m] = started[m]->stop(SIGTERM);
            });
    }
    for (int m = 0; m < members; ++m) {
        const auto log = without_debug_lines(started[m]->log());
        BOOST_TEST(exit_codes[m] == 0, "exit code " << exit_codes[m] << "\n" << log);
        BOOST_TEST(!si::test::contains(log.substr(0, log.find("stopping on SIGTERM")), "kafka: cluster '': assigned"),
                   "stopped before its first assignment");
    }
}

BOOST_AUTO_TEST_CASE(healthz_is_503_while_the_database_refuses_connections_and_ok_once_it_is_back) {
    relay_world world;
    world.conninfo += " password=Pw1 sslpassword=Pw2";  // secrets the server does not ask for (trust)
    relay_process relay(world.arguments(), world.dir / "relay.log");
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST(await_health(port, 200).body == "ok\n");

    world.refuse_connections(true);
    const auto down = await_health(port, 503);  // the pending-action job (every 200 ms) notices first
    BOOST_TEST(down.status == 503, relay.log());
    BOOST_TEST(si::test::contains(down.body, "jobs: pending actions:"), down.body);
    for (const char* secret : {"Pw1", "Pw2"}) {
        BOOST_TEST(!si::test::contains(down.body, secret), down.body);
        BOOST_TEST(!si::test::contains(relay.log(), secret), relay.log());
    }

    world.refuse_connections(false);
    BOOST_TEST(await_health(port, 200).status == 200, relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
}

BOOST_AUTO_TEST_CASE(the_relay_runs_operator_actions_and_housekeeping_on_schedule) {
    relay_world world;
    buffer_in_expired_instance(world.conninfo, "OrderValidated", "v1", "o1");  // housekeeping forwards it
    relay_process relay(world.arguments(), world.dir / "relay.log");
    BOOST_TEST_REQUIRE(relay.http_port() != 0, relay.log());
    world.cluster.produce(input, si::testing::record("OrderShipped", "s2", "o2"));  // waits for its predecessors
    const std::string waiting = "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING' AND idempotence_id = 's2'";
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, waiting, 1), relay.log());
    soci::session db(soci::postgresql, world.conninfo);
    const auto id = si::test::count(db, "SELECT id FROM sequenced_message WHERE idempotence_id = 's2'");

    const auto consume = si::test::run_cli("consume " + std::to_string(id) + " --postgres " + si::test::shell_quote(world.conninfo));
    BOOST_TEST_REQUIRE(consume.exit_code == 0, consume.output);
    BOOST_TEST_REQUIRE(world.wait_for_output(1), relay.log());  // the relay's pending-action job replayed it
    const auto published = world.cluster.read_all(output, output_partitions, 1);
    BOOST_TEST_REQUIRE(published.size() == 1u);
    BOOST_TEST(published.front().value == "OrderShipped:s2");

    const auto forwarded = world.cluster.read_all(dead_letters, 1, 1, std::chrono::seconds(60));  // housekeeping every 1 s
    BOOST_TEST_REQUIRE(forwarded.size() == 1u, relay.log());
    BOOST_TEST(forwarded.front().value == "OrderValidated:v1");
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST(si::test::contains(relay.log(), "pending actions: 1 executed"), relay.log());
    BOOST_TEST(si::test::contains(relay.log(), "1 waiting forwarded"), relay.log());
}

BOOST_AUTO_TEST_CASE(a_relay_that_cannot_start_says_why_and_exits_1) {
    relay_world world;
    auto missing_topic = world.arguments();
    missing_topic.push_back("--output-prefix");
    missing_topic.push_back("no-such-");
    for (auto& a : missing_topic)
        if (a == "OrderSequence=" + output) a = "OrderSequence=no-such-topic";
    relay_process relay(missing_topic, world.dir / "missing.log");
    BOOST_TEST(relay.wait(std::chrono::seconds(60)) == 1);
    BOOST_TEST(si::test::contains(relay.log(), "topic 'no-such-topic' does not exist"), relay.log());

    std::ofstream(world.dir / "orders.yaml") << "sequences:\n  - name: Broken\n    retentionPeriod: 0s\n    messages: []\n";
    relay_process broken(world.arguments(), world.dir / "broken.log");
    BOOST_TEST(broken.wait(std::chrono::seconds(60)) == 1);
    BOOST_TEST(si::test::contains(broken.log(), "orders.yaml:3:"), broken.log());
}

BOOST_AUTO_TEST_CASE(a_relay_without_its_dead_letter_topic_says_so_and_exits_1) {
    relay_world world;
    auto arguments = world.arguments();
    for (auto& a : arguments)
        if (a == dead_letters) a = "no-such-dlq";
    relay_process relay(arguments, world.dir / "missing-dlq.log");
    BOOST_TEST(relay.wait(std::chrono::seconds(60)) == 1, relay.log());
    BOOST_TEST(si::test::contains(relay.log(), "topic 'no-such-dlq' does not exist"), relay.log());
}

BOOST_AUTO_TEST_CASE(records_of_a_megabyte_are_dead_lettered_without_their_value_and_do_not_wedge_their_partition) {
    relay_world world;
    const std::string megabyte(1000000, 'x');  // librdkafka producers refuse 1,000,000 bytes and more by default
    const auto typed = si::testing::record("OrderCreated", "big", "order-big", megabyte);
    auto untyped = si::testing::record("OrderCreated", "big-untyped", "order-big-untyped", megabyte);
    untyped.headers.erase(untyped.headers.begin());  // no message-type header: the bad-message path
    world.cluster.produce(input, typed, 0);
    world.cluster.produce(input, untyped, 0);
    constexpr int behind = 5;
    for (int i = 0; i < behind; ++i)
        world.cluster.produce(input, si::testing::record("OrderCreated", "after-" + std::to_string(i), "order-" + std::to_string(i)), 0);

    relay_process relay(world.arguments(), world.dir / "relay.log");
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(behind, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(await_health(port, 200).status == 200, relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    auto rejected = world.cluster.read_written(dead_letters, 1);  // the relay has exited: all it wrote
    BOOST_TEST_REQUIRE(rejected.size() == 2u, relay.log());
    std::ranges::sort(rejected, {}, [](const si::envelope& r) { return header_of(r, "seqinbox-original-offset"); });  // two threads
    for (std::int64_t offset = 0; offset < 2; ++offset) {
        const auto& r = rejected[static_cast<std::size_t>(offset)];
        BOOST_TEST(r.value == si::record_bytes(""));
        BOOST_TEST(header_of(r, "seqinbox-omitted") == "value");
        BOOST_TEST(header_of(r, "seqinbox-original-value-size") == "1000000");
        BOOST_TEST(header_of(r, "seqinbox-original-topic") == input);
        BOOST_TEST(header_of(r, "seqinbox-original-partition") == "0");
        BOOST_TEST(header_of(r, "seqinbox-original-offset") == std::to_string(offset));
    }
    BOOST_TEST(header_of(rejected[0], "idempotence-id") == "big", "the original headers are kept");
    BOOST_TEST(si::test::contains(header_of(rejected[0], "seqinbox-reason"), "MSG_SIZE_TOO_LARGE"), "the publish failed");
    BOOST_TEST(header_of(rejected[0], "seqinbox-failure-kind") == "publish_failed", "refused inside a batch (issue 33)");
    BOOST_TEST(si::test::contains(header_of(rejected[1], "seqinbox-reason"), "message-type"), "the bad message");
}

/// The value of the unlabelled series `name` in a /metrics body (-1 when absent).
double metric_value(const std::string& body, const std::string& name) {
    const auto at = body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size() + 2));
}

BOOST_AUTO_TEST_CASE(a_record_retried_again_and_again_is_named_in_healthz_and_counted_in_metrics) {
    relay_world world;
    auto bad = si::testing::record("OrderCreated", "stuck", "order-stuck");
    bad.headers.erase(bad.headers.begin());  // no message-type header: straight to the dead-letter topic
    world.cluster.produce(input, bad, 1);
    // Then every produce request is the relay's dead-letter producer's: ten attempts refused at
    // every stage (whole, without value, bare), then the topic takes the record.
    constexpr int produce_request = 0;
    constexpr int attempts_refused = 10;
    for (int i = 0; i < 3 * attempts_refused; ++i)
        rd_kafka_mock_push_request_errors(world.cluster.native(), produce_request, 1, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);

    relay_process relay(world.arguments(), world.dir / "relay.log");
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    const auto retrying = await_health(port, 503, std::chrono::seconds(60));
    const auto during = si::test::http_get(port, "/metrics").body;
    BOOST_TEST_REQUIRE(retrying.status == 503, relay.log());
    BOOST_TEST(si::test::contains(retrying.body, "retrying orders[1]@0: "), retrying.body);
    BOOST_TEST(si::test::contains(retrying.body, "failed attempt"), retrying.body);
    BOOST_TEST(si::test::contains(retrying.body, "MSG_SIZE_TOO_LARGE"), retrying.body);
    BOOST_TEST(metric_value(during, "seqinbox_retrying_records") == 1, during);
    BOOST_TEST(metric_value(during, "seqinbox_delivery_retries_total") >= 1, during);

    // The decision is the dead letter, not a 200: a rebalance (the mock's second round of the
    // group's join, frequent under the sanitizers) forgets the board's entry until the record
    // is given back again, so /healthz may answer 200 between two attempts.
    BOOST_TEST_REQUIRE(world.cluster.read_all(dead_letters, 1, 1, std::chrono::seconds(90)).size() == 1u, relay.log());
    BOOST_TEST(await_health(port, 200).status == 200, relay.log());
    const auto after = si::test::http_get(port, "/metrics").body;
    BOOST_TEST(metric_value(after, "seqinbox_retrying_records") == 0, after);
    BOOST_TEST(metric_value(after, "seqinbox_delivery_retries_total") == attempts_refused, after);
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
}

BOOST_AUTO_TEST_CASE(housekeep_once_forwards_waiting_messages_before_removing_expired_instances) {
    relay_world world;
    buffer_in_expired_instance(world.conninfo, "OrderValidated", "v1", "o1");
    const std::string base = "housekeep --once --postgres " + si::test::shell_quote(world.conninfo) + " --bootstrap-servers " +
                             world.cluster.bootstraps() + " --dead-letter-topic " + dead_letters +
                             " --producer-property log_level=0 --removal-delay 1h";
    const auto run = si::test::run_cli(base);
    BOOST_TEST(run.exit_code == 0, run.output);
    BOOST_TEST(si::test::contains(run.output, "instances marked expired   1"), run.output);
    BOOST_TEST(si::test::contains(run.output, "expired instances removed  1"), run.output);
    BOOST_TEST(si::test::contains(run.output, "waiting messages forwarded 1"), run.output);

    const auto forwarded = world.cluster.read_all(dead_letters, 1, 1);
    BOOST_TEST_REQUIRE(forwarded.size() == 1u);
    BOOST_TEST(forwarded.front().key == "o1");
    BOOST_TEST(forwarded.front().value == "OrderValidated:v1");
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequence_instance") == 0);

    const auto again = si::test::run_cli(base + " --json");
    BOOST_TEST(again.exit_code == 0, again.output);
    BOOST_TEST(si::test::contains(again.output, "\"expired_removed\":0"), again.output);
    BOOST_TEST(si::test::contains(again.output, "\"complete\":true"), again.output);
}

BOOST_AUTO_TEST_CASE(housekeep_once_removes_at_once_with_a_zero_removal_delay_and_reports_each_job) {
    relay_world world;
    buffer_in_expired_instance(world.conninfo, "OrderValidated", "v1", "o1");
    const std::string base = "housekeep --once --postgres " + si::test::shell_quote(world.conninfo) + " --bootstrap-servers " +
                             world.cluster.bootstraps() + " --dead-letter-topic " + dead_letters + " --producer-property log_level=0";
    const auto refused = si::test::run_cli(base + " --work-share 0");
    BOOST_TEST(refused.exit_code == 2, refused.output);
    BOOST_TEST(si::test::contains(refused.output, "'--work-share' expects a whole number from 1 to 100, not '0'"), refused.output);

    const auto run = si::test::run_cli(base + " --removal-delay 0s --work-share 100 --json");
    BOOST_TEST(run.exit_code == 0, run.output);
    BOOST_TEST(si::test::contains(run.output, "\"marked\":1,\"expired_removed\":1,\"forwarded\":1"), run.output);
    for (const char* job : {"closed_cleanup", "expiry_marking", "removal"})
        BOOST_TEST(si::test::contains(run.output, std::string("{\"job\":\"") + job + "\",\"rows\":"), run.output);
    BOOST_TEST(si::test::contains(run.output, "\"job\":\"removal\",\"rows\":1,\"batches\":1,\"seconds\":"), run.output);
    BOOST_TEST(world.cluster.read_all(dead_letters, 1, 1).size() == 1u);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequence_instance") == 0);

    const auto text = si::test::run_cli(base + " --removal-delay 0s");
    BOOST_TEST(text.exit_code == 0, text.output);
    BOOST_TEST(si::test::contains(text.output, "job removal"), text.output);
    BOOST_TEST(si::test::contains(text.output, "0 rows in 1 batches"), text.output);
}

BOOST_AUTO_TEST_CASE(records_whose_json_extractor_finds_no_context_id_are_dead_lettered_not_published) {
    relay_world world;
    // No missingContextId: the relay's default (dead-letter) applies.
    std::ofstream(world.dir / "orders.yaml") << R"(sequences:
  - name: OrderSequence
    retentionPeriod: 24h
    messages:
      - { type: OrderCreated, contextIdExtractor: "json:/order/id" }
      - { type: OrderValidated, contextIdExtractor: "json:/order/id", releaseCondition: { predecessor: OrderCreated } }
)";
    const std::string order = R"({"order": {"id": "o1"}})";
    world.cluster.produce(input, si::testing::record("OrderValidated", "v-text", "o1", "not json"), 0);
    world.cluster.produce(input, si::testing::record("OrderValidated", "v-null", "o1", R"({"order": {"id": null}})"), 0);
    world.cluster.produce(input, si::testing::record("OrderCreated", "c1", "o1", order), 0);
    world.cluster.produce(input, si::testing::record("OrderValidated", "v1", "o1", order), 0);

    relay_process relay(world.arguments(), world.dir / "relay.log");
    const auto rejected = world.cluster.read_all(dead_letters, 1, 2, std::chrono::seconds(30));
    BOOST_TEST_REQUIRE(world.wait_for_output(2), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    const auto published = world.cluster.read_written(output, output_partitions);  // the relay has exited: all it wrote
    std::string ids;
    for (const auto& r : published) ids += std::string(r.find_header("idempotence-id").value_or("")) + " ";
    BOOST_TEST(ids == "c1 v1 ", "published: " << ids << "; expected only the records with a context id, in declared order");
    BOOST_TEST_REQUIRE(rejected.size() == 2u, relay.log());
    for (const auto& r : rejected) {
        const std::string reason(r.find_header("seqinbox-reason").value_or(""));
        BOOST_TEST(si::test::contains(reason, "no context id: the extractor of message type 'OrderValidated' returned none"), reason);
    }
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message") == 2);
}

BOOST_AUTO_TEST_CASE(a_tombstone_is_buffered_and_published_as_a_tombstone_and_log_lines_carry_their_time) {
    relay_world world;
    auto tombstone = si::testing::record("OrderValidated", "v1", "t1");
    tombstone.value = std::nullopt;
    auto empty = si::testing::record("OrderCreated", "c1", "t1");
    empty.value = "";
    world.cluster.produce(input, tombstone);  // waits in the database for its predecessor
    relay_process relay(world.arguments(), world.dir / "relay.log");
    BOOST_TEST_REQUIRE(wait_for_log(relay, "buffered OrderValidated/v1"), relay.log());
    world.cluster.produce(input, empty);
    BOOST_TEST_REQUIRE(world.wait_for_output(2), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    const auto published = world.cluster.read_all(output, output_partitions, 2);
    BOOST_TEST_REQUIRE(published.size() == 2u);
    for (const auto& r : published) {
        const bool is_tombstone = r.find_header("idempotence-id") == "v1";
        BOOST_TEST_CONTEXT(r.find_header("message-type").value_or("?")) {
            BOOST_TEST(r.key == "t1");
            BOOST_TEST(r.value == (is_tombstone ? tombstone.value : empty.value));
        }
    }
    BOOST_TEST(si::test::contains(relay.log(), "released OrderValidated/v1"), relay.log());

    const auto timestamped = [](std::string_view line) {
        if (!si::test::starts_with_iso_utc_time(line)) return false;
        const auto rest = line.substr(si::test::iso_utc_time_shape.size());
        return std::ranges::any_of(std::array{" trace ", " debug ", " info ", " warn ", " error "},
                                   [&](std::string_view level) { return rest.starts_with(level); });
    };
    std::istringstream lines(relay.log());
    for (std::string line; std::getline(lines, line);) BOOST_TEST(timestamped(line), line);
}
