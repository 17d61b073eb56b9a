// seqinbox::kafka::source against librdkafka's mock cluster, with the in-memory store behind
// the inbox: exactly once and in order through Kafka, rebalances, crashes before the commit,
// brokers going down, and two clusters feeding one sequence.
#define BOOST_TEST_MODULE seqinbox kafka source
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "kafka/kafka_world.hpp"
#include "offset_tracker.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "support/print_record_bytes.hpp"

namespace si = seqinbox;
namespace kafka = seqinbox::kafka;
using namespace std::chrono_literals;
using si::testing::call_log;
using si::testing::mock_cluster;
using si::testing::order_workload;

namespace {

constexpr int partitions = 4;
const std::string topic = "orders";

using kafka_inbox = si::basic_inbox<si::memory::store, kafka::source, si::memory::error_sink>;

kafka::source_options options_for(const mock_cluster& cluster, const std::string& group) {
    kafka::source_options options;
    options.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), group)}};
    options.report = [](std::string_view line) { if (std::getenv("SEQINBOX_TEST_KAFKA_REPORT")) std::fprintf(stderr, "%.*s\n", int(line.size()), line.data()); };  // brokers going down are expected here
    return options;
}

/// One service instance: a Kafka source and an inbox on the shared store; listeners record
/// into `log` after `pace` (a slow listener keeps a stream in flight while the group changes).
struct service {
    kafka::source source;
    si::memory::error_sink sink;
    kafka_inbox inbox;

    service(si::memory::store& store, call_log& log, kafka::source_options options,
            const si::declarations<std::string>& decls = si::testing::order_declarations(),
            std::function<void()> pace = {})
        : source(std::move(options), decls, topic), inbox(store, source, sink, decls) {
        for (const auto& seq : inbox.declared().sequences)
            for (const auto& msg : seq.messages)
                inbox.on(msg.qualified_type(), [&log, pace](const std::string&, const kafka_inbox::context& ctx) {
                    if (pace) pace();
                    log.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
                });
    }
};

void expect_all_committed(const mock_cluster& cluster, const std::string& group, const std::string& name = topic) {
    const auto committed = cluster.committed(group, name, partitions);
    const auto ends = cluster.end_offsets(name, partitions);
    for (int p = 0; p < partitions; ++p)
        BOOST_TEST(committed[p] == ends[p], name << "/" << p << ": committed " << committed[p] << ", end " << ends[p]);
}

/// A fresh mock cluster whose orders topic holds an order workload of 100 contexts with 30 %
/// duplicates (produced at once unless `Produced` is false), and the store and listener log the
/// services of one test share.
template <std::uint64_t Seed, bool Produced = true>
struct order_stream {
    mock_cluster cluster;
    const order_workload work{100, 0.3, Seed};
    si::memory::store store;
    call_log log;

    order_stream() {
        cluster.create_topic(topic, partitions);
        if (Produced) work.produce(cluster, topic, partitions, Seed + 1);
    }
};
using outage_stream = order_stream<7, false>;

/// Listeners that record every message, except that they throw for a record whose value is "boom".
template <class Inbox>
void listen_refusing_boom(Inbox& inbox, call_log& log) {
    for (const auto& seq : inbox.declared().sequences)
        for (const auto& msg : seq.messages)
            inbox.on(msg.qualified_type(), [&log](const std::string& value, const typename Inbox::context& ctx) {
                if (value == "boom") throw std::runtime_error("the listener refused " + ctx.idempotence_id);
                log.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
            });
}

/// A service on a fresh mock cluster whose failures go to a real dead-letter topic; its
/// listeners refuse records whose value is "boom". Topics have one partition, so the records a
/// test produces keep their order.
struct dead_letter_service {
    using inbox_type = si::basic_inbox<si::memory::store, kafka::source, kafka::dead_letter_sink>;
    static constexpr const char* group = "dead-letter";

    mock_cluster cluster;
    bool topics_created = create_topics(cluster);  // before the source subscribes
    si::memory::store store;
    call_log log;
    kafka::source source{options_for(cluster, group), si::testing::order_declarations(), topic};
    kafka::dead_letter_sink sink{{.producer = si::testing::quiet_client(cluster.bootstraps()), .topic = "dead-letters"}};
    inbox_type inbox{store, source, sink, si::testing::order_declarations()};

    dead_letter_service() { listen_refusing_boom(inbox, log); }

    void produce(const std::vector<si::envelope>& records) {
        for (const auto& e : records) cluster.produce_async(topic, e, 0);
        cluster.flush();
    }

    static bool create_topics(mock_cluster& c) {
        c.create_topic(topic, 1);
        c.create_topic("dead-letters", 1);
        return true;
    }
};

}  // namespace

// ---- the offset bookkeeping on its own ----

BOOST_AUTO_TEST_SUITE(offset_tracking)

using kafka::detail::offset_tracker;
const kafka::detail::partition_id p0{0, "orders", 0};

BOOST_AUTO_TEST_CASE(an_undecided_record_holds_back_the_commit_of_later_ones) {
    offset_tracker t;
    for (std::int64_t o = 10; o < 13; ++o) t.polled(p0, o);
    t.decided(p0, 11);
    t.decided(p0, 12);
    BOOST_TEST(t.take_commits(0).empty());
    t.decided(p0, 10);
    const auto due = t.take_commits(0);
    BOOST_TEST_REQUIRE(due.size() == 1u);
    BOOST_TEST(due[0].offset == 13);
    BOOST_TEST(t.take_commits(0).empty());  // taken once
    BOOST_TEST(t.take_commits(0, true).size() == 1u);  // unless all are asked for
    BOOST_TEST(t.in_flight_total() == 0u);
}

BOOST_AUTO_TEST_CASE(a_record_given_back_is_polled_again_and_commits_only_when_decided) {
    offset_tracker t;
    for (std::int64_t o = 0; o < 4; ++o) t.polled(p0, o);
    t.decided(p0, 0);
    t.decided(p0, 2);
    t.given_back(p0, 1);  // 1 comes again; 3 is still held by another thread
    BOOST_TEST(t.in_flight_total() == 1u);
    BOOST_TEST(t.seek_target(p0).value_or(-1) == 1);
    BOOST_TEST(t.take_commits(0).at(0).offset == 1);
    t.decided(p0, 3);  // decided while 1 waits to be polled again: the floor holds
    BOOST_TEST(t.take_commits(0).empty());
    for (std::int64_t o = 1; o < 4; ++o) t.polled(p0, o);  // the seek back to 1 polls 2 and 3 again
    BOOST_TEST(!t.seek_target(p0).has_value());
    BOOST_TEST(t.in_flight_total() == 1u);
    t.decided(p0, 1);
    BOOST_TEST(t.take_commits(0).at(0).offset == 4);
    t.decided(p0, 2);  // the second copies are duplicates
    t.decided(p0, 3);
    BOOST_TEST(t.in_flight_total() == 0u);
}

BOOST_AUTO_TEST_CASE(two_threads_giving_back_records_of_one_partition_seek_to_the_lower_one) {
    offset_tracker t;
    for (std::int64_t o = 0; o < 6; ++o) t.polled(p0, o);
    t.given_back(p0, 4);
    t.given_back(p0, 2);  // whichever seek runs last, it goes to 2
    BOOST_TEST(t.seek_target(p0).value_or(-1) == 2);
    t.polled(p0, 2);  // the seek took effect
    BOOST_TEST(t.seek_target(p0).value_or(-1) == 4);  // 3 was polled: 4 is the one left
    t.polled(p0, 3);
    t.polled(p0, 4);
    BOOST_TEST(!t.seek_target(p0).has_value());
    t.given_back(p0, 0);
    t.given_back(p0, 0);  // once is enough
    BOOST_TEST(t.in_flight_total() == 5u);  // 1 to 5
    BOOST_TEST(t.seek_target(p0).value_or(-1) == 0);
}

BOOST_AUTO_TEST_CASE(a_record_polled_between_a_give_back_and_its_seek_does_not_move_the_commit_past_it) {
    offset_tracker t;
    for (std::int64_t o = 0; o < 4; ++o) t.polled(p0, o);  // thread A holds 1, thread B holds 3
    t.decided(p0, 0);
    t.given_back(p0, 1);
    t.polled(p0, 4);  // fetched before the seek back to 1 took effect
    t.decided(p0, 4);
    t.decided(p0, 3);
    BOOST_TEST(t.in_flight_total() == 1u);  // 2 is still held
    for (const auto& due : t.take_commits(0, true)) BOOST_TEST(due.offset <= 1);
    t.polled(p0, 1);
    t.decided(p0, 1);
    t.decided(p0, 2);
    BOOST_TEST(t.take_commits(0).at(0).offset == 5);
}

BOOST_AUTO_TEST_CASE(a_failed_commit_makes_the_position_due_again_and_revoked_partitions_are_forgotten) {
    offset_tracker t;
    const kafka::detail::partition_id p1{0, "orders", 1}, other_cluster{1, "orders", 0};
    t.polled(p0, 5);
    t.polled(p1, 7);
    t.polled(other_cluster, 9);
    t.decided(p0, 5);
    const auto due = t.take_commits(0);
    BOOST_TEST_REQUIRE(due.size() == 1u);
    t.commit_failed(due[0]);
    BOOST_TEST(t.take_commits(0).size() == 1u);
    BOOST_TEST(t.in_flight(0, [](const auto&) { return true; }) == 1u);
    t.forget(0, [&](const auto& where) { return where == p1; });
    BOOST_TEST(t.in_flight(0, [](const auto&) { return true; }) == 0u);
    BOOST_TEST(t.in_flight_total() == 1u);  // the other cluster's record
}

BOOST_AUTO_TEST_CASE(a_revocation_commit_covers_a_position_whose_asynchronous_commit_is_in_flight) {
    offset_tracker t;
    const kafka::detail::partition_id p1{0, "orders", 1};
    t.polled(p0, 1);
    t.polled(p1, 1);
    t.decided(p0, 1);
    t.decided(p1, 1);
    BOOST_TEST(t.take_commits(0).size() == 2u);  // sent asynchronously, outcome unknown
    const auto revoked = [&](const auto& where) { return where == p0; };
    const auto due = t.take_commits(0, revoked, true);
    BOOST_TEST_REQUIRE(due.size() == 1u);
    BOOST_TEST(due[0].offset == 2);
    BOOST_TEST(t.take_commits(0, revoked).empty());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- configuration ----

BOOST_AUTO_TEST_SUITE(configuration)

void expect_configuration_error(const std::function<void()>& make, const std::string& expected) {
    try {
        make();
        BOOST_ERROR("no error; expected one naming " << expected);
    } catch (const si::error& e) {
        BOOST_TEST(si::to_string(e.category()) == "configuration");
        BOOST_TEST(std::string(e.what()).find(expected) != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(bad_configuration_is_refused_with_the_offending_setting) {
    const auto decls = si::testing::order_declarations();
    auto with = [&](const std::string& name, const std::string& value) {
        kafka::source_options options;
        options.clusters = {{"", si::testing::consumer_properties("127.0.0.1:1", "g")}};
        if (value.empty()) options.clusters[0].consumer.erase(name);
        else options.clusters[0].consumer[name] = value;
        return [options, &decls] { kafka::source(options, decls, topic); };
    };
    expect_configuration_error(with("enable.auto.commit", "true"), "'enable.auto.commit' = 'true'");
    expect_configuration_error(with("group.id", ""), "'group.id' is required");
    expect_configuration_error(with("bootstrap.servers", ""), "'bootstrap.servers' is required");
    expect_configuration_error(with("no.such.property", "1"), "no.such.property");
    expect_configuration_error(with("session.timeout.ms", "soon"), "'session.timeout.ms' = 'soon'");

    kafka::source_options options;
    options.clusters = {{"", si::testing::consumer_properties("127.0.0.1:1", "g")}};
    expect_configuration_error([&] { kafka::source(options, decls, ""); }, "'OrderCreated' names no topic");
    auto twice = options;
    twice.clusters.push_back(twice.clusters[0]);
    expect_configuration_error([&] { kafka::source(twice, decls, topic); }, "cluster '' is configured twice");
    auto elsewhere = decls;
    elsewhere.sequences[0].messages[4].cluster = "audit";
    expect_configuration_error([&] { kafka::source(options, elsewhere, topic); }, "cluster 'audit', which is not configured");
}

BOOST_AUTO_TEST_SUITE_END()

// ---- end to end through the mock cluster ----

BOOST_AUTO_TEST_SUITE(end_to_end)

BOOST_FIXTURE_TEST_CASE(out_of_order_and_duplicated_records_of_100_contexts_are_handled_once_in_order, order_stream<1>) {
    service s(store, log, options_for(cluster, "e2e"));
    si::testing::committed_watch committed(cluster, "e2e", topic, partitions);
    si::testing::consumers threads;
    threads.run<kafka_inbox>({&s.inbox}, 3, [&] { return log.size() >= work.logical && committed.reached(); });
    s.source.close();

    si::testing::expect_once_in_order(log, work);
    BOOST_TEST(s.sink.size() == 0u);
    expect_all_committed(cluster, "e2e");
    BOOST_TEST_MESSAGE("records " << work.records.size() << ", logical " << work.logical << ", commits "
                                  << s.source.statistics().commits);
}

BOOST_AUTO_TEST_CASE(a_new_group_starts_at_the_earliest_record_and_reports_where_each_partition_starts) {
    mock_cluster cluster;
    cluster.create_topic(topic, 2);
    for (int n = 0; n < 6; ++n) cluster.produce(topic, si::envelope{.key = "k", .value = std::to_string(n)}, n % 2);
    cluster.flush();
    std::vector<std::string> reported;
    std::mutex reported_mutex;
    kafka::source_options options;
    options.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), "new-group")}};
    options.clusters[0].consumer.erase("auto.offset.reset");  // the library's own default
    options.report = [&](std::string_view line) {
        std::lock_guard lock(reported_mutex);
        reported.emplace_back(line);
    };
    kafka::source source(options, {{"", {topic}}});
    std::size_t polled = 0;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (polled < 6 && std::chrono::steady_clock::now() < deadline)
        if (const auto record = source.poll()) {
            ++polled;
            source.acknowledge(*record);
        }
    source.close();
    BOOST_TEST(polled == 6u);  // records produced before the group's first join
    std::lock_guard lock(reported_mutex);
    for (const std::string partition : {"orders/0", "orders/1"})
        BOOST_TEST(std::ranges::count(reported, "cluster '': " + partition + " has no committed offset: starts at the earliest offset") ==
                   1);
}

/// A thread that polls `source` and acknowledges every record, counting them.
struct acknowledging_poller {
    std::atomic<std::size_t> polled{0};
    std::jthread thread;
    explicit acknowledging_poller(kafka::source& source)
        : thread([this, &source](std::stop_token stop) {
              while (!stop.stop_requested())
                  if (const auto record = source.poll()) {
                      source.acknowledge(*record);
                      ++polled;
                  }
          }) {}
};

bool wait_for(const std::function<bool()>& condition, std::chrono::seconds patience = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!condition())
        if (std::chrono::steady_clock::now() > deadline) return false;
        else std::this_thread::sleep_for(20ms);
    return true;
}

BOOST_AUTO_TEST_CASE(a_partition_back_after_a_failed_revocation_commit_does_not_commit_its_old_position) {
    mock_cluster cluster;
    cluster.create_topic(topic, 2);
    auto produce = [&](int from, int to) {
        for (int n = from; n < to; ++n) cluster.produce_async(topic, si::envelope{.key = "k", .value = std::to_string(n)}, n % 2);
        cluster.flush();
    };
    std::mutex reported_mutex;
    std::vector<std::string> reported;
    auto options = [&](bool report) {
        kafka::source_options o;
        o.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), "stale")}};
        o.clusters[0].consumer["partition.assignment.strategy"] = "roundrobin";
        o.commit_interval = 1h;  // only revocations and close() commit
        o.report = [&, report](std::string_view line) {
            std::lock_guard lock(reported_mutex);
            if (report) reported.emplace_back(line);
        };
        return o;
    };
    produce(0, 10);
    auto a = std::make_unique<kafka::source>(options(true), std::vector<kafka::subscription>{{"", {topic}}});
    auto polling_a = std::make_unique<acknowledging_poller>(*a);
    BOOST_TEST_REQUIRE(wait_for([&] { return polling_a->polled == 10u; }));
    // The commit when B joins fails: A keeps 5 and 5 decided, uncommitted.
    rd_kafka_mock_push_request_errors(cluster.native(), 8 /* OffsetCommit */, 1, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS);
    auto b = std::make_unique<kafka::source>(options(false), std::vector<kafka::subscription>{{"", {topic}}});
    auto polling_b = std::make_unique<acknowledging_poller>(*b);
    BOOST_TEST_REQUIRE(wait_for([&] { return polling_b->polled >= 5u; }));  // B owns one partition from its start
    BOOST_TEST_REQUIRE(wait_for([&] {
        std::lock_guard lock(reported_mutex);
        return std::ranges::any_of(reported, [](const auto& line) { return line.find("commit before revocation failed") != line.npos; });
    }));
    produce(10, 20);  // B moves its partition to 10 and commits that
    BOOST_TEST_REQUIRE(wait_for([&] { return polling_b->polled >= 10u && polling_a->polled >= 20u; }));
    b->commit();
    const auto after_b = cluster.committed("stale", topic, 2);
    const int lost = after_b[0] == 10 ? 0 : 1;
    BOOST_TEST_REQUIRE(after_b[lost] == 10);
    polling_b.reset();
    b->close();
    b.reset();
    // A gets B's partition back: what A decided there before must not be committed now. The
    // rebalance count rises as A's assignment callback starts; the line reporting where the
    // partition starts comes after the callback forgot what A tracked there: wait for both.
    BOOST_TEST_REQUIRE(wait_for([&] { return a->statistics().rebalances >= 5u; }, 60s));
    const std::string back = "cluster '': " + topic + "/" + std::to_string(lost) + " starts at committed offset 10";
    BOOST_TEST_REQUIRE(wait_for([&] {
        std::lock_guard lock(reported_mutex);
        return std::ranges::count(reported, back) >= 1;
    }), "A reported taking " << topic << "/" << lost << " back at offset 10");
    polling_a.reset();
    a->commit();
    BOOST_TEST(cluster.committed("stale", topic, 2)[lost] == 10);
    a->close();
    for (const auto& line : reported) BOOST_TEST_MESSAGE("member A: " << line);
}

/// Two members of one group with `strategy`; the second joins while the first is mid-stream.
struct rebalance_mid_stream : order_stream<3> {
    void run(const std::string& strategy) {
        auto options = [&] {
            auto o = options_for(cluster, "rebalance");
            o.clusters[0].consumer["partition.assignment.strategy"] = strategy;
            return o;
        };
        std::atomic<bool> second_joined{false};
        // The first member is slow until the second one has partitions, so the stream is mid-way.
        auto slow_until_joined = [&] {
            if (!second_joined) std::this_thread::sleep_for(10ms);
        };
        service first(store, log, options(), si::testing::order_declarations(), slow_until_joined);
        std::unique_ptr<service> second;
        si::testing::committed_watch committed(cluster, "rebalance", topic, partitions);
        si::testing::consumers threads, more;
        std::jthread joiner([&] {
            while (log.size() < work.logical / 10) std::this_thread::sleep_for(10ms);
            second = std::make_unique<service>(store, log, options());
            more.spin<kafka_inbox>({&second->inbox}, 1, [&] {
                second_joined = second_joined || second->source.statistics().polled > 0;
                return log.size() >= work.logical && second_joined && committed.reached();
            });
        });
        threads.run<kafka_inbox>({&first.inbox}, 1, [&] { return log.size() >= work.logical && second_joined && committed.reached(); }, 90s);
        joiner.join();
        BOOST_TEST(more.unexpected().empty(), more.unexpected());
        BOOST_TEST_REQUIRE(second_joined.load());
        const auto handled_before_close = log.size();
        first.source.close();
        second->source.close();

        BOOST_TEST(log.size() == handled_before_close);
        si::testing::expect_once_in_order(log, work);
        BOOST_TEST(first.source.statistics().rebalances >= 2u);  // assigned, revoked (and assigned again)
        BOOST_TEST(second->source.statistics().polled > 0u);
        expect_all_committed(cluster, "rebalance");
        BOOST_TEST_MESSAGE(strategy << ": first polled " << first.source.statistics().polled << ", second polled "
                                           << second->source.statistics().polled << ", handled " << log.size());
    }
};

BOOST_FIXTURE_TEST_CASE(a_rebalance_in_the_middle_of_the_stream_loses_and_repeats_nothing, rebalance_mid_stream) {
    run("range");  // eager: every partition is revoked, then assigned again
}

BOOST_FIXTURE_TEST_CASE(an_incremental_rebalance_in_the_middle_of_the_stream_loses_and_repeats_nothing, rebalance_mid_stream) {
    run("cooperative-sticky");  // only the partitions that move are revoked
}

BOOST_FIXTURE_TEST_CASE(a_consumer_killed_before_committing_has_its_records_skipped_as_duplicates, order_stream<5>) {
    auto never_commits = options_for(cluster, "crash");
    never_commits.commit_interval = std::chrono::hours(1);
    auto crashed = std::make_unique<service>(store, log, never_commits);
    si::testing::consumers threads;
    threads.run<kafka_inbox>({&crashed->inbox}, 2, [&] {
        return crashed->source.statistics().acknowledged >= work.records.size();  // nothing comes twice yet
    });
    crashed->source.abandon();
    BOOST_TEST(crashed->source.statistics().commits == 0u);
    crashed.reset();
    si::testing::expect_once_in_order(log, work);
    const auto handled = log.size();

    service restarted(store, log, options_for(cluster, "crash"));
    si::testing::committed_watch committed(cluster, "crash", topic, partitions);
    threads.run<kafka_inbox>({&restarted.inbox}, 2, [&] { return committed.reached(); });
    restarted.source.close();
    BOOST_TEST(restarted.source.statistics().polled >= work.records.size());  // all of it came again
    BOOST_TEST(log.size() == handled);                                        // and was skipped
    expect_all_committed(cluster, "crash");
}

BOOST_FIXTURE_TEST_CASE(consumption_resumes_after_every_broker_was_down, outage_stream) {
    const std::size_t half = work.records.size() / 2;
    work.produce(cluster, topic, partitions, 8, 0, half);
    std::atomic<bool> brokers_were_down{false};
    service s(store, log, options_for(cluster, "outage"));
    // Half of the stream is consumed, every broker goes down for longer than the session
    // timeout, and the other half is produced once they are back: it must still arrive.
    std::jthread outage([&] {
        while (s.source.statistics().acknowledged < half) std::this_thread::sleep_for(5ms);
        rd_kafka_mock_broker_set_down(cluster.native(), -1);
        std::this_thread::sleep_for(5s);
        rd_kafka_mock_broker_set_up(cluster.native(), -1);
        work.produce(cluster, topic, partitions, 9, half);
        brokers_were_down = true;
    });
    si::testing::committed_watch committed(cluster, "outage", topic, partitions);
    si::testing::consumers threads;
    threads.run<kafka_inbox>({&s.inbox}, 2, [&] { return brokers_were_down && log.size() >= work.logical && committed.reached(); }, 90s);
    const auto stats = s.source.statistics();
    BOOST_TEST_MESSAGE("polled " << stats.polled << ", acknowledged " << stats.acknowledged << ", commits " << stats.commits
                                 << ", commit failures " << stats.commit_failures << ", rebalances " << stats.rebalances
                                 << ", consumer errors " << stats.consumer_errors);
    s.source.close();
    si::testing::expect_once_in_order(log, work);
    expect_all_committed(cluster, "outage");
}

BOOST_AUTO_TEST_CASE(two_clusters_feed_one_sequence) {
    mock_cluster main_cluster, audit_cluster;
    main_cluster.create_topic(topic, partitions);
    audit_cluster.create_topic("shipping", partitions);
    auto decls = si::testing::order_declarations();
    decls.sequences[0].messages[4].topic = "shipping";  // OrderShipped
    decls.sequences[0].messages[4].cluster = "audit";

    const order_workload work(100, 0.3, 9);
    std::mt19937_64 rng(10);
    for (const auto& e : work.records) {
        const bool shipped = *e.find_header("message-type") == "OrderShipped";
        (shipped ? audit_cluster : main_cluster).produce_async(shipped ? "shipping" : topic, e, static_cast<std::int32_t>(rng() % partitions));
    }
    main_cluster.flush();
    audit_cluster.flush();

    auto options = options_for(main_cluster, "two-clusters");
    options.clusters.push_back({"audit", si::testing::consumer_properties(audit_cluster.bootstraps(), "two-clusters")});
    // poll() shares poll_timeout between the clusters in turn: once one cluster is drained,
    // every other poll waits out its share there (50 ms of the default 100 ms), about 13 s
    // for this stream. The test is about where the records come from, not that wait.
    options.poll_timeout = 10ms;
    si::memory::store store;
    call_log log;
    service s(store, log, options, decls);
    si::testing::consumers threads;
    si::testing::committed_watch main_committed(main_cluster, "two-clusters", topic, partitions),
        audit_committed(audit_cluster, "two-clusters", "shipping", partitions);
    threads.run<kafka_inbox>({&s.inbox}, 2, [&] {
        return log.size() >= work.logical && main_committed.reached() && audit_committed.reached();
    });
    s.source.close();

    si::testing::expect_once_in_order(log, work);
    std::size_t from_audit = 0;
    for (const auto& c : log.calls()) from_audit += c.type == "OrderShipped" ? 1 : 0;
    BOOST_TEST(from_audit == work.contexts.size());
    expect_all_committed(main_cluster, "two-clusters");
    expect_all_committed(audit_cluster, "two-clusters", "shipping");
}

// Poison records in the middle of one partition: a listener that throws, an undecodable record
// and an unknown type each become one dead-letter record naming the failure and its origin,
// and the records behind them in the partition are still handled.
BOOST_FIXTURE_TEST_CASE(poison_records_go_to_the_dead_letter_topic_and_the_partition_keeps_flowing, dead_letter_service) {
    auto boom = si::testing::record("OrderCreated", "boom@order-9", "order-9", "boom");
    auto undecodable = si::testing::record("OrderCreated", "x", "order-9");
    undecodable.headers = {{"message-type", "OrderCreated"}};  // no idempotence id
    const auto unknown = si::testing::record("OrderCancelled", "cancel@order-9", "order-9");
    const std::vector<si::envelope> stream = {si::testing::record("OrderCreated", "c@order-1", "order-1"), boom, undecodable, unknown,
                                              si::testing::record("OrderCreated", "c@order-2", "order-2")};
    produce(stream);

    si::testing::committed_watch committed(cluster, group, topic, 1);
    si::testing::consumers threads;
    threads.run<inbox_type>({&inbox}, 1, [&] { return log.size() == 2 && committed.reached(); });
    source.close();

    BOOST_TEST(log.count("OrderCreated", "c@order-2") == 1u);  // behind the poison, still handled
    const auto dead = cluster.read_all("dead-letters", 1, 3);
    BOOST_TEST_REQUIRE(dead.size() == 3u);
    BOOST_TEST(sink.statistics().published == 3u);
    const std::vector<std::string> expected_reason = {"the listener refused boom@order-9", "idempotence-id", "unknown message type 'OrderCancelled'"};
    for (std::size_t i = 0; i < dead.size(); ++i) {
        const auto& original = stream[i + 1];
        BOOST_TEST(dead[i].key == original.key);
        BOOST_TEST(dead[i].value == original.value);
        BOOST_TEST(dead[i].find_header("message-type").value_or("") == *original.find_header("message-type"));
        auto header = [&](std::string_view name) { return std::string(dead[i].find_header(name).value_or("<none>")); };
        BOOST_TEST(header(kafka::dead_letter_header::reason).find(expected_reason[i]) != std::string::npos, header(kafka::dead_letter_header::reason));
        BOOST_TEST(header(kafka::dead_letter_header::original_topic) == topic);
        BOOST_TEST(header(kafka::dead_letter_header::original_partition) == "0");
        BOOST_TEST(header(kafka::dead_letter_header::original_offset) == std::to_string(i + 1));
    }
    auto header_of = [&](std::size_t i, std::string_view name) { return std::string(dead[i].find_header(name).value_or("<none>")); };
    BOOST_TEST(header_of(0, kafka::dead_letter_header::qualified_type) == "OrderCreated");
    BOOST_TEST(header_of(0, kafka::dead_letter_header::idempotence_id) == "boom@order-9");
    BOOST_TEST(header_of(0, kafka::dead_letter_header::context_id) == "order-9");
    BOOST_TEST(header_of(2, kafka::dead_letter_header::qualified_type) == "OrderCancelled");
    BOOST_TEST(header_of(2, kafka::dead_letter_header::idempotence_id) == "cancel@order-9");
}

// The dead-letter record cannot be written: the inbox reaches no decision, the source takes the
// record back and does not commit past it, and the next attempt writes it.
BOOST_FIXTURE_TEST_CASE(a_dead_letter_record_that_cannot_be_written_holds_back_the_commit_until_it_is, dead_letter_service) {
    produce({si::testing::record("OrderCreated", "c@order-1", "order-1"), si::testing::record("OrderCreated", "boom@order-9", "order-9", "boom"),
             si::testing::record("OrderCreated", "c@order-2", "order-2")});

    auto next = [&] {
        for (;;)
            if (auto result = inbox.poll_once()) return *result;
    };
    BOOST_TEST(to_string(next().outcome) == "processed");
    // Refused whole, without its value and as bare failure headers: no dead letter at all.
    rd_kafka_mock_push_request_errors(cluster.native(), 0 /* Produce */, 3, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    BOOST_CHECK_THROW(next(), si::error);
    BOOST_TEST(source.statistics().redelivered == 1u);
    source.commit();
    BOOST_TEST(cluster.committed(group, topic, 1).at(0) == 1);  // not past the failed record

    BOOST_TEST(to_string(next().outcome) == "failed");  // the same record again; its dead letter is written
    BOOST_TEST(to_string(next().outcome) == "processed");
    source.close();
    BOOST_TEST(cluster.committed(group, topic, 1).at(0) == 3);
    const auto dead = cluster.read_all("dead-letters", 1, 1);
    BOOST_TEST_REQUIRE(dead.size() == 1u);
    BOOST_TEST(std::string(dead[0].find_header(kafka::dead_letter_header::original_offset).value_or("")) == "1");
    BOOST_TEST(log.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- batches ----

BOOST_AUTO_TEST_SUITE(batches)

/// A fresh cluster whose orders topic gets records of one context per partition, numbered by
/// their offset, and sources that poll it in batches.
struct batch_stream {
    mock_cluster cluster;

    batch_stream() { cluster.create_topic(topic, partitions); }

    void produce(std::int32_t partition, int count) {
        for (int i = 0; i < count; ++i)
            cluster.produce_async(topic, si::testing::record("OrderCreated", "r" + std::to_string(i), "p" + std::to_string(partition)), partition);
        cluster.flush();
    }

    kafka::source_options options(const std::string& group, std::chrono::milliseconds linger) const {
        auto o = options_for(cluster, group);
        o.batch_linger = linger;
        return o;
    }

    /// Batches of at most `max` until `total` records came (or a minute passed).
    static std::vector<std::vector<si::envelope>> batches_of(kafka::source& source, std::size_t max, std::size_t total) {
        std::vector<std::vector<si::envelope>> batches;
        std::size_t seen = 0;
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (seen < total && std::chrono::steady_clock::now() < deadline)
            if (auto batch = source.poll_batch(max); !batch.empty()) {
                seen += batch.size();
                batches.push_back(std::move(batch));
            }
        return batches;
    }

    /// The offsets of each partition, in the order the batches hold them.
    static std::map<std::int32_t, std::vector<std::int64_t>> offsets_by_partition(const std::vector<std::vector<si::envelope>>& batches) {
        std::map<std::int32_t, std::vector<std::int64_t>> result;
        for (const auto& batch : batches)
            for (const auto& r : batch) result[r.partition].push_back(r.offset);
        return result;
    }

    /// Decides every record (a source waits for undecided ones when it closes).
    static void acknowledge_all(kafka::source& source, const std::vector<std::vector<si::envelope>>& batches) {
        for (const auto& batch : batches)
            for (const auto& r : batch) source.acknowledge(r);
    }

    /// Partition p of the batches holds offsets 0 to counts[p] - 1 in order; once all are
    /// decided and the source closed, the group committed counts.
    void expect_each_partition_whole(kafka::source& source, const std::string& group, const std::vector<std::vector<si::envelope>>& batches,
                                     const std::vector<std::int64_t>& counts) const {
        const auto offsets = offsets_by_partition(batches);
        for (std::size_t p = 0; p < counts.size(); ++p)
            BOOST_TEST(offsets.at(static_cast<std::int32_t>(p)) == first(counts[p]), boost::test_tools::per_element());
        acknowledge_all(source, batches);
        source.close();
        BOOST_TEST(cluster.committed(group, topic, static_cast<int>(counts.size())) == counts, boost::test_tools::per_element());
    }

    static std::vector<std::int64_t> first(std::int64_t n) {
        std::vector<std::int64_t> result(static_cast<std::size_t>(n));
        std::iota(result.begin(), result.end(), 0);
        return result;
    }
};

BOOST_FIXTURE_TEST_CASE(batches_hold_at_most_max_records_in_the_order_of_each_partition, batch_stream) {
    produce(0, 10);
    produce(1, 5);
    // A long linger: every batch fills up to max, from what is fetched already or arrives soon.
    kafka::source source(options("batch-order", 30s), {{"", {topic}}});
    const auto batches = batches_of(source, 5, 15);
    BOOST_TEST_REQUIRE(batches.size() == 3u);
    for (const auto& batch : batches) BOOST_TEST(batch.size() == 5u);
    expect_each_partition_whole(source, "batch-order", batches, {10, 5});
}

BOOST_FIXTURE_TEST_CASE(a_batch_waits_within_its_linger_for_a_record_produced_after_its_first, batch_stream) {
    produce(0, 1);
    kafka::source lingering(options("batch-linger", 60s), {{"", {topic}}});
    std::jthread later([&] {
        while (lingering.statistics().polled == 0) std::this_thread::sleep_for(5ms);
        produce(0, 1);  // after the batch's first record was polled
    });
    const auto batches = batches_of(lingering, 2, 1);
    BOOST_TEST_REQUIRE(batches.size() == 1u);
    BOOST_TEST(batches[0].size() == 2u, "the batch waited for the second record");
    acknowledge_all(lingering, batches);
    lingering.close();
}

BOOST_FIXTURE_TEST_CASE(without_a_linger_a_batch_takes_what_is_there_and_does_not_wait_for_max, batch_stream) {
    produce(0, 3);
    kafka::source eager(options("batch-no-linger", 0ms), {{"", {topic}}});
    const auto batches = batches_of(eager, 100, 3);  // far fewer than max: what is there
    BOOST_TEST(offsets_by_partition(batches).at(0) == first(3), boost::test_tools::per_element());
    acknowledge_all(eager, batches);
    eager.close();
}

BOOST_FIXTURE_TEST_CASE(a_batch_given_back_last_record_first_comes_again_from_the_first_record_of_each_partition, batch_stream) {
    produce(0, 3);
    produce(1, 3);
    kafka::source source(options("batch-redeliver", 30s), {{"", {topic}}});
    const auto batches = batches_of(source, 6, 6);
    BOOST_TEST_REQUIRE(batches.size() == 1u);
    for (auto r = batches[0].rbegin(); r != batches[0].rend(); ++r) source.redeliver(*r);  // as basic_inbox::poll_batch does
    source.commit();
    BOOST_TEST(cluster.committed("batch-redeliver", topic, 2) == (std::vector<std::int64_t>{RD_KAFKA_OFFSET_INVALID, RD_KAFKA_OFFSET_INVALID}), boost::test_tools::per_element());

    const auto again = batches_of(source, 6, 6);
    BOOST_TEST(source.statistics().redelivered == 6u);
    expect_each_partition_whole(source, "batch-redeliver", again, {3, 3});
}

BOOST_AUTO_TEST_SUITE_END()
