// bench_kafka: what the Kafka adapter costs, against the two parts it joins.
//
// One workload of small records (orders: Created, Validated, Prepared, Shipped of each context,
// every record in declared order, no duplicates, so every delivery is processed at once) is
// produced once into a 4-partition topic of a librdkafka mock cluster, then measured three ways:
//   B  bare_records_per_s    a plain librdkafka consumer (assign(), no group join) polls and counts
//   E  engine_only_per_s     the inbox on the in-memory store and in-memory source (no Kafka)
//   K  inbox_records_per_s   kafka::source (subscribe, commits behind decisions) + the same inbox
// Target: K >= 0.5 x min(B, E). The Kafka clocks (B, K) start at the first record received, so
// the assignment wait and the group join (~3 s on the mock) are excluded and printed apart
// (bare_assign_wait_s, inbox_join_s); K's close() (final synchronous commit, leaving the group)
// is printed apart too (inbox_close_s). Each figure is the best of several rounds (the machine is
// shared and noisy), with the worst printed as `<name>_worst`.
//
// Prints one `name value` pair per line.
//   bench_kafka            200,000 records, 3 rounds (Release build expected)
//   bench_kafka --quick    5,000 records, 1 round, for the CTest smoke run
//
// Exits non-zero when a correctness check fails: a record not handled exactly once or out of
// declared order, a delivery not processed, or (K) committed offsets that differ from the end
// offsets after close().
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "bench/bench_support.hpp"
#include "kafka/mock_cluster.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/store.hpp"
#include "support/world.hpp"

namespace {

namespace si = seqinbox;
namespace kafka = seqinbox::kafka;
using namespace seqinbox::bench;  // require, print, clocks: the benchmarks' shared vocabulary
using si::testing::mock_cluster;

using memory_inbox = si::basic_inbox<si::memory::store, si::memory::source, si::memory::error_sink>;
using kafka_inbox = si::basic_inbox<si::memory::store, kafka::source, si::memory::error_sink>;

const std::string topic = "orders";
constexpr int partitions = 4;
constexpr auto patience = std::chrono::seconds(180);  // per Kafka run: join + consumption (ASan under CI load: over 60 s)
// One path through the order sequence of support/world.hpp, in declared order.
const std::vector<std::string> order_path = {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderShipped"};

// ---------------------------------------------------------------------------------------------
// Workload and the per-context order check shared by E and K
// ---------------------------------------------------------------------------------------------

struct workload {
    std::size_t contexts = 0;
    std::vector<si::envelope> records;  ///< in production order
    std::vector<std::int32_t> partition;  ///< records[i] is produced to partition[i]
};

/// All first steps, then all second steps, ...: every context's records in declared order, and
/// each context on one partition (index % partitions) so Kafka keeps that order too. Records are
/// kept small (~70 bytes): the mock caps each partition's log at a few MB and silently drops its
/// oldest records beyond that.
workload make_workload(std::size_t records) {
    workload w;
    w.contexts = records / order_path.size();
    w.records.reserve(w.contexts * order_path.size());
    for (std::size_t step = 0; step < order_path.size(); ++step)
        for (std::size_t c = 0; c < w.contexts; ++c) {
            // Idempotence id `<context index>-<step>`: the listener checks order without a map.
            const std::string context = std::to_string(c);
            w.records.push_back(si::testing::record(order_path[step], context + "-" + std::to_string(step), "o" + context, "{}"));
            w.partition.push_back(static_cast<std::int32_t>(c % partitions));
        }
    return w;
}

/// What the listeners saw: calls, and per context how many steps of order_path were handled.
struct handled_checks {
    std::size_t calls = 0;
    std::size_t misordered = 0;
    std::vector<std::uint8_t> progress;

    explicit handled_checks(std::size_t contexts) : progress(contexts, 0) {}

    void handled(std::size_t step, const std::string& idempotence_id) {
        ++calls;
        std::size_t c = std::numeric_limits<std::size_t>::max();
        std::from_chars(idempotence_id.data(), idempotence_id.data() + idempotence_id.size(), c);
        if (c >= progress.size() || step >= order_path.size() || progress[c] != step) ++misordered;
        else ++progress[c];
    }

    void expect_complete(const workload& w, const std::string& who) const {
        require(calls == w.records.size(),
                who + ": listener calls " + std::to_string(calls) + " != records " + std::to_string(w.records.size()));
        require(misordered == 0, who + ": " + std::to_string(misordered) + " listener calls out of declared order");
        require(std::ranges::all_of(progress, [](std::uint8_t n) { return n == order_path.size(); }),
                who + ": a context was not completed");
    }
};

/// Every declared type needs a listener; a type off order_path (OrderExpedited) is never sent,
/// so a call to it counts as out of order.
template <class Inbox>
void check_listeners(Inbox& inbox, handled_checks& checks) {
    for (const auto& seq : inbox.declared().sequences)
        for (const auto& msg : seq.messages) {
            const auto step = static_cast<std::size_t>(std::ranges::find(order_path, msg.type) - order_path.begin());
            inbox.on(msg.qualified_type(), [&checks, step](const std::string&, const typename Inbox::context& ctx) {
                checks.handled(step, ctx.idempotence_id);
            });
        }
}

/// Records per second over `records` records taken between `from` and `to`.
double rate(std::size_t records, clock_type::time_point from, clock_type::time_point to) {
    return static_cast<double>(records) / elapsed_s(from, to);
}

// ---------------------------------------------------------------------------------------------
// B: a bare librdkafka consumer, by assignment
// ---------------------------------------------------------------------------------------------

rd_kafka_t* bare_consumer(const std::string& bootstraps) {
    auto props = si::testing::quiet_client(bootstraps);
    props.insert({{"group.id", "bench-bare"}, {"enable.auto.commit", "false"}});
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char reason[256];
    for (const auto& [name, value] : props)
        if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), reason, sizeof reason) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            throw std::runtime_error("bare consumer: " + std::string(reason));
        }
    rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
    if (!consumer) throw std::runtime_error("bare consumer: " + std::string(reason));
    rd_kafka_poll_set_consumer(consumer);
    return consumer;
}

void assign_from_beginning(rd_kafka_t* consumer) {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p)
        rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    const auto err = rd_kafka_assign(consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) throw std::runtime_error(std::string("bare consumer: assign: ") + rd_kafka_err2str(err));
}

struct kafka_run {
    double per_s = 0;
    double wait_s = 0;   ///< until the first record (assignment or group join)
    double close_s = 0;  ///< close(): final commit and leaving the group (K only)
};

/// Records received per partition by the bare consumer.
struct bare_counts {
    std::vector<std::size_t> per_partition = std::vector<std::size_t>(partitions, 0);
    std::size_t total = 0;
    std::string describe() const {
        std::string text = std::to_string(total) + " records (";
        for (int p = 0; p < partitions; ++p) text += (p ? ", " : "") + std::to_string(per_partition[p]);
        return text + " per partition)";
    }
};

/// Polls and counts until every record arrived; the clock starts at the first one.
bare_counts poll_and_count(rd_kafka_t* consumer, std::size_t expected, clock_type::time_point& first) {
    bare_counts counts;
    const auto deadline = clock_type::now() + patience;
    while (counts.total < expected && clock_type::now() < deadline) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100);
        if (!m) continue;
        if (!m->err) {
            if (counts.total++ == 0) first = clock_type::now();
            ++counts.per_partition.at(static_cast<std::size_t>(m->partition));
        }
        rd_kafka_message_destroy(m);
    }
    return counts;
}

kafka_run run_bare(const mock_cluster& cluster, const workload& w) {
    rd_kafka_t* consumer = bare_consumer(cluster.bootstraps());
    const auto started = clock_type::now();
    assign_from_beginning(consumer);
    clock_type::time_point first{};
    const bare_counts counts = poll_and_count(consumer, w.records.size(), first);
    const auto finished = clock_type::now();
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    require(counts.total == w.records.size(), "bare: " + counts.describe() + " of " + std::to_string(w.records.size()));
    return {rate(counts.total - 1, first, finished), elapsed_s(started, first), 0};
}

// ---------------------------------------------------------------------------------------------
// E: the engine alone, in-memory store and source
// ---------------------------------------------------------------------------------------------

/// poll_once until the source is empty, as K does, so both pay the same inbox path.
double run_engine(const workload& w) {
    si::memory::store store;
    si::memory::source source;
    si::memory::error_sink sink;
    memory_inbox inbox(store, source, sink, si::testing::order_declarations());
    handled_checks checks(w.contexts);
    check_listeners(inbox, checks);
    for (const auto& e : w.records) source.push(e);

    std::size_t not_processed = 0;
    const auto started = clock_type::now();
    while (const auto result = inbox.poll_once())
        if (result->outcome != si::outcome::processed) ++not_processed;
    const auto finished = clock_type::now();

    checks.expect_complete(w, "engine");
    require(not_processed == 0, "engine: " + std::to_string(not_processed) + " deliveries not processed");
    require(sink.size() == 0, "engine: error sink not empty");
    return rate(w.records.size(), started, finished);
}

// ---------------------------------------------------------------------------------------------
// K: kafka::source + the same inbox
// ---------------------------------------------------------------------------------------------

kafka::source_options options_for(const mock_cluster& cluster, const std::string& group) {
    kafka::source_options options;
    options.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), group)}};
    options.report = [](std::string_view) {};  // assignment lines; errors show up as failed checks
    return options;
}

void expect_all_committed(const mock_cluster& cluster, const std::string& group) {
    const auto committed = cluster.committed(group, topic, partitions);
    const auto ends = cluster.end_offsets(topic, partitions);
    for (int p = 0; p < partitions; ++p)
        require(committed[p] == ends[p], "inbox: " + topic + "/" + std::to_string(p) + " committed " +
                                             std::to_string(committed[p]) + ", end " + std::to_string(ends[p]));
}

/// A fresh group per round, so every round reads the topic from the beginning.
kafka_run run_inbox(const mock_cluster& cluster, const workload& w, const std::string& group) {
    const auto decls = si::testing::order_declarations();
    si::memory::store store;
    si::memory::error_sink sink;
    const auto started = clock_type::now();
    kafka::source source(options_for(cluster, group), decls, topic);
    kafka_inbox inbox(store, source, sink, decls);
    handled_checks checks(w.contexts);
    check_listeners(inbox, checks);

    // The clock starts when the first record has been handled (the group join is excluded), so
    // the rate counts the records after it.
    const auto deadline = clock_type::now() + patience;
    clock_type::time_point first{};
    std::size_t not_processed = 0;
    while (checks.calls < w.records.size() && clock_type::now() < deadline)
        if (const auto result = inbox.poll_once()) {
            if (result->outcome != si::outcome::processed) ++not_processed;
            if (first == clock_type::time_point{}) first = clock_type::now();
        }
    const auto finished = clock_type::now();
    source.close();
    const auto closed = clock_type::now();

    checks.expect_complete(w, "inbox");
    require(not_processed == 0, "inbox: " + std::to_string(not_processed) + " deliveries not processed");
    require(sink.size() == 0, "inbox: error sink not empty");
    require(source.statistics().polled == w.records.size(), "inbox: polled " + std::to_string(source.statistics().polled));
    expect_all_committed(cluster, group);
    return {rate(w.records.size() - 1, first, finished), elapsed_s(started, first), elapsed_s(finished, closed)};
}

// ---------------------------------------------------------------------------------------------
// Rounds and report
// ---------------------------------------------------------------------------------------------

/// The lowest and highest value of one figure over the rounds.
struct spread {
    double lowest = std::numeric_limits<double>::max();
    double highest = 0;
    void add(double v) {
        lowest = std::min(lowest, v);
        highest = std::max(highest, v);
    }
    /// A rate: the best round, and the worst as `<name>_worst`.
    void print_rate(const std::string& name) const {
        print(name, highest);
        print(name + "_worst", lowest);
    }
};

/// Whether the mock still holds every record of `topic` (its partition logs are capped in size).
void expect_log_complete(const mock_cluster& cluster, const workload& w) {
    rd_kafka_t* client = bare_consumer(cluster.bootstraps());
    std::int64_t kept = 0;
    for (int p = 0; p < partitions; ++p) {
        std::int64_t low = -1, high = -1;
        const auto err = rd_kafka_query_watermark_offsets(client, topic.c_str(), p, &low, &high, 10000);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) kept += high - low;
    }
    rd_kafka_destroy(client);
    require(kept == static_cast<std::int64_t>(w.records.size()),
            "the mock topic keeps " + std::to_string(kept) + " of " + std::to_string(w.records.size()) +
                " records (its partition logs are capped: make the records smaller)");
}

void produce(mock_cluster& cluster, const workload& w) {
    cluster.create_topic(topic, partitions);
    for (std::size_t i = 0; i < w.records.size(); ++i) cluster.produce_async(topic, w.records[i], w.partition[i]);
    cluster.flush();
    expect_log_complete(cluster, w);
}

void bench(std::size_t records, int rounds) {
    const workload w = make_workload(records);
    mock_cluster cluster;
    produce(cluster, w);

    spread bare, engine, inbox, bare_wait, join, close;
    for (int r = 0; r < rounds; ++r) {  // interleaved, so that noise hits every figure alike
        const kafka_run b = run_bare(cluster, w);
        bare.add(b.per_s);
        bare_wait.add(b.wait_s);
        engine.add(run_engine(w));
        const kafka_run k = run_inbox(cluster, w, "bench-inbox-" + std::to_string(r));
        inbox.add(k.per_s);
        join.add(k.wait_s);
        close.add(k.close_s);
    }

    print("records", w.records.size());
    print("contexts", w.contexts);
    print("partitions", static_cast<std::size_t>(partitions));
    print("rounds", static_cast<std::size_t>(rounds));
    print("kafka_clock_starts_at_first_record", std::size_t{1});
    bare.print_rate("bare_records_per_s");
    engine.print_rate("engine_only_per_s");
    inbox.print_rate("inbox_records_per_s");
    // Excluded from the rates above: the longest round's figure.
    print("bare_assign_wait_s", bare_wait.highest);
    print("inbox_join_s", join.highest);
    print("inbox_close_s", close.highest);
    const double ratio = inbox.highest / std::min(bare.highest, engine.highest);
    print("ratio_inbox_vs_min", ratio);
    print("target_met", std::size_t{ratio >= 0.5 ? 1u : 0u});
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--quick") {
            quick = true;
        } else {
            std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }
    return seqinbox::bench::run_guarded("bench_kafka", [&] {
        if (quick) bench(5'000, 1);
        else bench(200'000, 3);
    });
}
