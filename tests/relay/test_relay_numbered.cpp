// Numbered sequences through the relay, as a user runs it: `seqinbox run` as a child process on
// the mock cluster and a throwaway PostgreSQL, a YAML sequence numbered by `header:seq`. Records
// of several contexts, numbers shuffled and duplicated, are published in number order per
// context, each number once; a missing number is skipped by the relay's gap-timeout job (policy
// skip) or its waiting successors dead-lettered (gap_timeout); under hold, `seqinbox show` and
// the operator API name the missing numbers and `seqinbox skip-gap` lets the rest through.
#define BOOST_TEST_MODULE seqinbox relay numbered
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "postgresql/cli_runner.hpp"
#include "relay/http_client.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

const std::string consumer_group = "relay-numbered";

/// The ledger, numbered by header seq from 1; `gap` adds its gapTimeout and gapPolicy lines.
void declare_ledger(const relay_world& world, const std::string& gap = {}) {
    std::ofstream(world.dir / "orders.yaml") << "sequences:\n"
                                                "  - name: LedgerSequence\n"
                                                "    retentionPeriod: 24h\n"
                                             << gap
                                             << "    messages:\n"
                                                "      - { type: LedgerEntry, contextIdExtractor: key, sequenceNumber: \"header:seq\" }\n";
}

/// Entry `id` of `context` numbered `number`, on input partition `partition`.
void produce(relay_world& world, const std::string& context, const std::string& id, int number, int partition = 0) {
    auto record = si::testing::record("LedgerEntry", id, context);
    record.headers.push_back({"seq", std::to_string(number)});
    world.cluster.produce(input, record, partition);
}

/// The relay publishing the ledger to the output topic; jobs every 200 ms (relay_world).
relay_process start_relay(const relay_world& world, int threads = 1) {
    auto arguments = world.arguments(consumer_group, threads);
    std::ranges::replace(arguments, "OrderSequence=" + output, "LedgerSequence=" + output);
    return relay_process(arguments, world.dir / "relay.log");
}

/// The numbers published per context, in output order (a context: one output partition).
std::map<std::string, std::vector<int>> published_numbers(const relay_world& world) {
    std::map<std::string, std::vector<int>> numbers;
    for (const auto& r : world.cluster.read_written(output, output_partitions)) numbers[r.key.value_or("")].push_back(std::stoi(header_of(r, "seq")));
    return numbers;
}

std::string gap_series(const std::string& policy) {
    return "seqinbox_gap_timeouts_total{sequence=\"LedgerSequence\",policy=\"" + policy + "\"} ";
}

std::string with_db(const relay_world& world, const std::string& command) { return command + " --postgres " + shell_quote(world.conninfo); }

}  // namespace

BOOST_AUTO_TEST_CASE(shuffled_and_repeated_numbers_are_published_in_number_order_per_context_each_once) {
    relay_world world;
    declare_ledger(world);
    constexpr int contexts = 12, numbers = 10;
    std::vector<std::pair<std::string, int>> records;
    for (int c = 0; c < contexts; ++c)
        for (int n = 1; n <= numbers; ++n) {
            records.emplace_back("c" + std::to_string(c), n);
            if (n % 3 == 0) records.emplace_back("c" + std::to_string(c), n);  // a duplicate of the number
        }
    std::mt19937 random(38);
    std::ranges::shuffle(records, random);
    int sent = 0;
    for (const auto& [context, n] : records)
        produce(world, context, "e" + std::to_string(n) + "-" + std::to_string(sent++) + "@" + context, n, static_cast<int>(random() % input_partitions));
    relay_process relay = start_relay(world, 2);
    BOOST_TEST_REQUIRE(relay.http_port() != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(contexts * numbers), relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_input_decided(consumer_group, contexts * numbers), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());

    std::vector<int> in_order(numbers);
    std::iota(in_order.begin(), in_order.end(), 1);
    const auto published = published_numbers(world);
    BOOST_TEST(published.size() == std::size_t{contexts});
    for (const auto& [context, seen] : published) BOOST_TEST(seen == in_order, context);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'") == 0);
}

BOOST_AUTO_TEST_CASE(a_missing_number_past_the_gap_timeout_is_skipped_by_the_relay) {
    relay_world world;
    declare_ledger(world, "    gapTimeout: 2s\n    gapPolicy: skip\n");
    for (const int n : {1, 2, 4, 5}) produce(world, "k", "e" + std::to_string(n), n);  // 3 never comes
    const auto started = std::chrono::steady_clock::now();
    relay_process relay = start_relay(world);
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(4, std::chrono::seconds(60)), relay.log());
    const bool after_timeout = std::chrono::steady_clock::now() - started >= std::chrono::seconds(2);
    BOOST_TEST(after_timeout, "released before the gap timed out");
    const auto metrics = http_get(port, "/metrics").body;
    BOOST_TEST(contains(metrics, gap_series("skip") + "1\n"), metrics);
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST((published_numbers(world)["k"] == std::vector<int>{1, 2, 4, 5}), relay.log());
    BOOST_TEST(world.cluster.end_offsets(dead_letters, 1).at(0) == 0, "nothing is dead-lettered");
}

BOOST_AUTO_TEST_CASE(under_dead_letter_the_numbers_after_the_gap_go_to_the_dead_letter_topic) {
    relay_world world;
    declare_ledger(world, "    gapTimeout: 2s\n    gapPolicy: dead-letter\n");
    for (const int n : {1, 3, 4}) produce(world, "k", "e" + std::to_string(n), n);  // 2 never comes
    relay_process relay = start_relay(world);
    BOOST_TEST_REQUIRE(relay.http_port() != 0, relay.log());
    const auto dead = world.cluster.read_all(dead_letters, 1, 2, std::chrono::seconds(60));
    BOOST_TEST_REQUIRE(dead.size() == 2u, relay.log());
    for (std::size_t i = 0; i < dead.size(); ++i) {
        BOOST_TEST(header_of(dead[i], "seq") == std::to_string(i + 3));
        BOOST_TEST(header_of(dead[i], "seqinbox-failure-kind") == "gap_timeout");
    }
    produce(world, "k", "e5", 5);  // the number after the dead-lettered ones
    BOOST_TEST_REQUIRE(world.wait_for_output(2, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST((published_numbers(world)["k"] == std::vector<int>{1, 5}), relay.log());
}

BOOST_AUTO_TEST_CASE(under_hold_show_and_the_api_name_the_missing_numbers_and_skip_gap_releases_the_rest) {
    relay_world world;
    declare_ledger(world);  // no gap timeout: waits for ever
    for (const int n : {1, 4, 5}) produce(world, "h", "e" + std::to_string(n), n);
    produce(world, "late", "l3", 3);  // nothing released: missing from the declared first number
    relay_process relay = start_relay(world);
    const auto port = relay.http_port();
    BOOST_TEST_REQUIRE(port != 0, relay.log());
    BOOST_TEST_REQUIRE(world.wait_for_output(1, std::chrono::seconds(60)), relay.log());
    BOOST_TEST_REQUIRE(wait_for_count(world.conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'", 3), relay.log());

    const auto shown = run_cli(with_db(world, "show") + " LedgerSequence h");
    BOOST_TEST(contains(shown.output, "numbers: last released 1; waiting 4 5; missing 2-3\n"), shown.output);
    const auto late = run_cli(with_db(world, "show") + " LedgerSequence late");
    BOOST_TEST(contains(late.output, "numbers: none released; waiting 3; missing none (and any before 3: show does not know the declared first number)"),
               late.output);
    const auto json = run_cli(with_db(world, "show") + " LedgerSequence h --json");
    BOOST_TEST(contains(json.output, R"("numbering": {"last_released": 1, "waiting": [4, 5], "missing": [[2, 3]]})"), json.output);
    const auto view = nlohmann::json::parse(http_get(port, "/api/v1/instances?sequence=LedgerSequence&context_id=late").body);
    BOOST_TEST(view["numbering"] == nlohmann::json::parse(R"({"last_released": null, "waiting": [3], "missing": [[1, 2]]})"), view.dump());

    const auto id = std::to_string(count(world.conninfo, "SELECT id FROM sequence_instance WHERE context_id = 'h'"));
    const auto skipped = run_cli(with_db(world, "skip-gap " + id));
    BOOST_TEST(skipped.exit_code == 0, skipped.output);
    BOOST_TEST(contains(skipped.output, "requested skip-gap on instance " + id), skipped.output);
    BOOST_TEST_REQUIRE(world.wait_for_output(3, std::chrono::seconds(60)), relay.log());
    BOOST_TEST(contains(run_cli(with_db(world, "show") + " LedgerSequence h").output, "numbers: last released 5; waiting none; missing none"));
    BOOST_TEST(relay.stop(SIGTERM) == 0, relay.log());
    BOOST_TEST((published_numbers(world)["h"] == std::vector<int>{1, 4, 5}), relay.log());
    BOOST_TEST(published_numbers(world).count("late") == 0u);
}
