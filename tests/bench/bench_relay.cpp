// bench_relay: records/s of the relay (`seqinbox run` as a child process, 4 consumer threads,
// batches as configured by default) on librdkafka's mock cluster and a durable throwaway
// PostgreSQL (fsync and synchronous_commit on), against the inbox's own batch figure on the
// same records, on the same server, in the same round.
//
// The headline, relay_records_per_s_scattered: the input topic is preloaded with the order
// workload of the relay tests (orders of four messages, 20 % sent twice, shuffled) with each
// record on a random partition, as independent producers spread them; then the relay starts and
// the benchmark reads the output topic until every released message arrived. The rate counts
// the input records (duplicates included: the relay decides them too) from the relay's partition
// assignment (its log line; its first poll comes after it) to the last output record seen. The
// mock cluster holds every group's first join for 3 s (a broker's group.initial.rebalance.delay.ms,
// which a relay in service pays once): relay_join_s and relay_first_decision_s (from the process
// start) are printed apart, and the rate from the start as ..._from_start.
// Beside it, deliveries_per_s_batch_4_scattered: the inbox's batches (250 records, the relay's
// default) on the same records without Kafka, 4 threads each deciding the contexts that hash to
// it as the relay's do (scattered_batches.hpp), and the ratio relay_vs_batch_4_scattered;
// ..._by_partition is the same with a thread per input partition (every thread meets every
// order, and batches wait for each other's instance locks, as the relay's did before).
// scattered_*: the relay run's breakdown per batch (relay_breakdown.hpp: the relay's own
// timings, sampled pg_stat_activity, CPU, rows written).
// Secondary, relay_records_per_s: each order's records on the partition of its key (a keyed
// producer), beside deliveries_per_s_batch_4 of bench_postgres (tests/bench/inbox_workers.hpp, 4
// threads delivering batches of 100 records of fresh contexts). A relay run in which the mock
// took the relay into a later round of the group's join (a rebalance, seconds with nothing
// decided) is run again and counted in relay_rounds_rebalanced.
//
//   bench_relay [--records N] [--rounds N] [--seconds N] [--quick] [-- RELAY OPTION...]
//       --records: input records of a relay run (default 20,000); --rounds: relay and batch runs
//       (default 3, figures are medians); --seconds: length of a batch run (default 3); --quick:
//       one round of 1,000 records and a batch run of 600 deliveries, for the CTest smoke run.
//       Options after `--` go to `seqinbox run` (e.g. --batch-linger 20ms).
//
// Prints one `name value` pair per line. Exits non-zero when a check fails: an output record
// missing, repeated or altered, a context's output out of declared order, a message not
// PROCESSED, the relay not stopping cleanly, or the batch run not processing every delivery.
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench/bench_support.hpp"
#include "bench/inbox_workers.hpp"
#include "bench/pg_settings.hpp"
#include "bench/relay_breakdown.hpp"
#include "bench/scattered_batches.hpp"
#include "kafka/mock_cluster.hpp"
#include "kafka/order_workload.hpp"
#include "postgresql/pg_server.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_setup.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/iso_utc_time.hpp"
#include "support/order_check.hpp"
#include "seqinbox/yaml/loader.hpp"

namespace {

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using namespace seqinbox::bench;  // require, print, clocks, the inbox workers
using seqinbox::test::pg_server;
using wall_clock = std::chrono::system_clock;  // the relay's log lines are wall-clock times

constexpr auto patience = std::chrono::seconds(180);  // for the relay run's output
constexpr std::size_t relay_threads = 4;
constexpr std::size_t batch_threads = 4;
constexpr double duplicate_share = 0.2;
constexpr std::uint64_t seed = 19;
constexpr std::size_t relay_batch_records = 250;  // the relay's default batch_size (relay_options)

struct options {
    std::size_t records = 20'000;
    std::size_t rounds = 3;
    run_length batch_run;
    std::vector<std::string> relay_options;  ///< added to the relay's arguments (after `--`)
};

constexpr const char* usage = "usage: bench_relay [--records N] [--rounds N] [--seconds N] [--quick] [-- RELAY OPTION...]\n";

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--records" && has_value) {
            o.records = positive_number(arg, argv[++i]);
        } else if (arg == "--rounds" && has_value) {
            o.rounds = positive_number(arg, argv[++i]);
        } else if (arg == "--seconds" && has_value) {
            o.batch_run.seconds = positive_number(arg, argv[++i]);
        } else if (arg == "--") {
            o.relay_options.assign(argv + i + 1, argv + argc);
            break;
        } else if (arg == "--quick") {
            o.records = 1'000;
            o.rounds = 1;
            o.batch_run.deliveries = 600;
        } else {
            throw std::invalid_argument("unknown or incomplete argument '" + std::string(arg) + "'");
        }
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// The output topic, as a user of the relay reads it
// ---------------------------------------------------------------------------------------------

/// What arrived on the output topic: copies per message, types per context in arrival order.
class output_tally {
public:
    void add(const si::envelope& r) {
        const std::string type(r.find_header("message-type").value_or(""));
        const std::string id(r.find_header("idempotence-id").value_or(""));
        ++records_;
        ++copies_[{type, id}];
        order_[r.key.value_or("")].push_back(type);
        if (r.value != type + ":" + id || id != type + "@" + r.key.value_or("")) ++altered_;
    }

    std::size_t distinct() const noexcept { return copies_.size(); }

    /// Every logical message of `work` once, unaltered, each context in declared order.
    void verify(const si::testing::order_workload& work) const {
        require(copies_.size() == work.logical, std::to_string(copies_.size()) + " distinct output records instead of " +
                                                    std::to_string(work.logical));
        require(records_ == work.logical, std::to_string(records_ - work.logical) + " output records repeated");
        require(altered_ == 0, std::to_string(altered_) + " output records with another key, value or ids than their input");
        const auto decls = si::testing::order_declarations();
        for (const auto& context : work.contexts) {
            const auto at = order_.find(context);
            const std::string violation = si::testing::order_violation(decls, at == order_.end() ? std::vector<std::string>{} : at->second);
            require(violation.empty(), context + ": " + violation);
        }
    }

private:
    std::size_t records_ = 0;
    std::size_t altered_ = 0;
    std::map<std::pair<std::string, std::string>, int> copies_;
    std::map<std::string, std::vector<std::string>> order_;
};

/// Reads the output topic from the beginning, by assignment.
class output_reader {
public:
    explicit output_reader(const si::testing::mock_cluster& cluster)
        // The mock answers an empty fetch only after fetch.wait.max.ms (500 ms by default), even
        // when records arrive meanwhile: the last record would be seen that much late.
        : reader_(cluster.make_reader("bench-relay-reader", {{"fetch.wait.max.ms", "5"}})) {
        rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(seqinbox::test::output_partitions);
        for (int p = 0; p < seqinbox::test::output_partitions; ++p)
            rd_kafka_topic_partition_list_add(list, seqinbox::test::output.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        const auto err = rd_kafka_assign(reader_, list);
        rd_kafka_topic_partition_list_destroy(list);
        if (err) throw std::runtime_error(std::string("output reader: assign: ") + rd_kafka_err2str(err));
    }
    ~output_reader() {
        rd_kafka_consumer_close(reader_);
        rd_kafka_destroy(reader_);
    }
    output_reader(const output_reader&) = delete;
    output_reader& operator=(const output_reader&) = delete;

    /// Reads until `expected` distinct messages arrived or `patience` passed; when the last one
    /// arrived (wall clock), or nothing when they did not all arrive.
    std::optional<wall_clock::time_point> read_until(output_tally& seen, std::size_t expected) {
        const auto deadline = clock_type::now() + patience;
        while (seen.distinct() < expected && clock_type::now() < deadline) {
            rd_kafka_message_t* m = rd_kafka_consumer_poll(reader_, 100);
            if (!m) continue;
            if (!m->err) seen.add(si::testing::mock_cluster::to_envelope(*m));
            rd_kafka_message_destroy(m);
        }
        if (seen.distinct() < expected) return std::nullopt;
        return wall_clock::now();
    }

private:
    rd_kafka_t* reader_;
};

// ---------------------------------------------------------------------------------------------
// The relay run
// ---------------------------------------------------------------------------------------------

/// The time at the start of a `2026-12-01T15:40:08.123Z ...` log line.
wall_clock::time_point log_time(std::string_view line) {
    require(seqinbox::test::starts_with_iso_utc_time(line), "a relay log line without its time: " + std::string(line));
    const auto number = [&](std::size_t at, std::size_t digits) {
        int n = 0;
        std::from_chars(line.data() + at, line.data() + at + digits, n);
        return n;
    };
    using namespace std::chrono;
    const sys_days date = year{number(0, 4)} / month{static_cast<unsigned>(number(5, 2))} / day{static_cast<unsigned>(number(8, 2))};
    return date + hours{number(11, 2)} + minutes{number(14, 2)} + seconds{number(17, 2)} + milliseconds{number(20, 3)};
}

/// When the relay's consumer got its partitions, from its log.
wall_clock::time_point assignment_time(const std::string& log) {
    const auto at = log.find("': assigned ");
    require(at != std::string::npos, "the relay logged no partition assignment (it logs it at --log-level info):\n" + log);
    const auto line_start = log.rfind('\n', at);
    return log_time(std::string_view(log).substr(line_start == std::string::npos ? 0 : line_start + 1));
}

std::size_t occurrences(std::string_view text, std::string_view what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

long long count(const std::string& conninfo, const std::string& sql) {
    soci::session db(soci::postgresql, conninfo);
    long long n = 0;
    db << sql, soci::into(n);
    return n;
}

/// A scratch directory for the declarations and the relay's log, removed by the destructor.
struct scratch_dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("seqinbox-bench-relay-" + std::to_string(::getpid()));
    scratch_dir() { std::filesystem::create_directories(path); }
    ~scratch_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
};

/// Four messages per order, a share of them twice: as many orders as make `records` records.
si::testing::order_workload workload_of(std::size_t records) {
    const auto orders = static_cast<std::size_t>(static_cast<double>(records) / (4 * (1 + duplicate_share)));
    return si::testing::order_workload(std::max<std::size_t>(orders, 1), duplicate_share, seed);
}

/// One relay run.
struct relay_figures {
    std::size_t input_records = 0;
    std::size_t output_records = 0;
    long long db_commits = 0;  ///< transactions of the relay's database: how far batches cut them
    double join_s = 0;         ///< from the process start to the partition assignment
    double seconds = 0;        ///< from the assignment to the last output record
    double per_s_from_start = 0;
    bool rebalanced = false;   ///< the group rebalanced during the run (more than one assignment generation)
    double first_decision_s = 0;  ///< from the process start to the first decision in the relay's log
    std::map<std::string, double> per_batch;  ///< the breakdown (relay_breakdown.hpp), per batch
    double per_s() const { return static_cast<double>(input_records) / seconds; }
};

/// When the relay logged its first decision (a consumer thread's processed, buffered or
/// skipped line).
wall_clock::time_point first_decision_time(const std::string& log) {
    std::size_t first = std::string::npos;
    for (const char* what : {": processed ", ": buffered ", ": skipped duplicate "})
        first = std::min(first, log.find(what));
    require(first != std::string::npos, "the relay logged no decision:\n" + log);
    const auto line_start = log.rfind('\n', first);
    return log_time(std::string_view(log).substr(line_start == std::string::npos ? 0 : line_start + 1));
}

/// The run's breakdown per batch: the relay's timings (its log line at stop), what its database
/// connections did (sampled), the CPU of the relay and its server processes, the rows written.
std::map<std::string, double> per_batch_breakdown(const std::map<std::string, double>& relay_line,
                                                  const std::map<std::string, double>& activity, double relay_cpu_s, double server_cpu_s,
                                                  long long rows_written) {
    const auto at = [](const std::map<std::string, double>& m, const std::string& name) {
        const auto it = m.find(name);
        return it == m.end() ? 0.0 : it->second;
    };
    const double batches = std::max(at(relay_line, "batches"), 1.0);
    std::map<std::string, double> b;
    b["batches"] = batches;
    b["records_per_batch"] = at(relay_line, "records") / batches;
    b["round_trips_per_batch"] = at(relay_line, "round_trips") / batches;
    b["rows_written_per_batch"] = static_cast<double>(rows_written) / batches;
    for (const char* phase : {"polling", "deciding", "awaiting", "committing"})
        b[std::string(phase) + "_ms_per_batch"] = at(relay_line, std::string(phase) + "_ms") / batches;
    for (const char* what : {"lock", "io", "running", "in_transaction"})
        b["pg_" + std::string(what) + "_ms_per_batch"] = 1000 * at(activity, what) / batches;
    b["relay_cpu_ms_per_batch"] = 1000 * relay_cpu_s / batches;
    b["server_cpu_ms_per_batch"] = 1000 * server_cpu_s / batches;
    return b;
}

/// Preloads the input, runs the relay until every released message is on the output topic,
/// checks the output and the database.
relay_figures run_relay(pg_server& server, std::size_t records, const std::vector<std::string>& relay_options,
                        si::testing::placement where) {
    using namespace seqinbox::test;
    const std::string conninfo = server.create_database();
    pg::migrate(conninfo);
    si::testing::mock_cluster cluster;
    cluster.create_topic(input, input_partitions);
    cluster.create_topic(output, output_partitions);
    cluster.create_topic(dead_letters, 1);
    const scratch_dir dir;
    std::ofstream(dir.path / "orders.yaml") << declarations_yaml;
    const auto work = workload_of(records);
    work.produce(cluster, input, input_partitions, seed, 0, work.records.size(), where);
    output_reader reader(cluster);
    output_tally seen;

    activity_sampler activity(conninfo);
    const auto started = wall_clock::now();
    auto arguments = relay_arguments(dir.path / "orders.yaml", conninfo, cluster.bootstraps(), "bench-relay",
                                     static_cast<int>(relay_threads));
    arguments.insert(arguments.end(), relay_options.begin(), relay_options.end());
    relay_process relay(arguments, dir.path / "relay.log");
    const auto last_output = reader.read_until(seen, work.logical);
    require(last_output.has_value(), std::to_string(seen.distinct()) + " of " + std::to_string(work.logical) +
                                         " released messages on the output topic after " + std::to_string(patience.count()) +
                                         " s; the relay's log:\n" + relay.log());
    activity.stop();
    const double relay_cpu_s = cpu_seconds_of(relay.pid());
    const double server_cpu_s = activity.server_cpu_seconds();  // before the relay disconnects
    require(relay.stop(SIGTERM) == 0, "the relay did not stop cleanly:\n" + relay.log());
    const auto published = cluster.end_offsets(output, output_partitions);
    require(std::accumulate(published.begin(), published.end(), 0LL) == static_cast<long long>(work.logical),
            "the output topic holds more records than released messages");
    seen.verify(work);
    require(count(conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == static_cast<long long>(work.logical),
            "not every message is PROCESSED");

    relay_figures f;
    f.input_records = work.records.size();
    f.output_records = work.logical;
    f.db_commits = count(conninfo, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()") -
                   static_cast<long long>(activity.samples());
    const auto assigned = assignment_time(relay.log());
    f.join_s = std::chrono::duration<double>(assigned - started).count();
    f.seconds = std::chrono::duration<double>(*last_output - assigned).count();
    f.per_s_from_start = static_cast<double>(f.input_records) / std::chrono::duration<double>(*last_output - started).count();
    // A generation after the first revokes the partitions of the one before (the stop does too;
    // a member that joins while the group's first join is pending has none to revoke).
    const std::string before_stop = relay.log().substr(0, relay.log().find("stopping on SIGTERM"));
    f.rebalanced = occurrences(before_stop, "': revoked ") > occurrences(before_stop, "': revoked 0 partitions");
    f.first_decision_s = std::chrono::duration<double>(first_decision_time(relay.log()) - started).count();
    f.per_batch = per_batch_breakdown(relay_batch_line(relay.log()), activity.seconds(), relay_cpu_s, server_cpu_s,
                                      count(conninfo, "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database"
                                                      " WHERE datname = current_database()"));
    return f;
}

// ---------------------------------------------------------------------------------------------
// The batch run and the report
// ---------------------------------------------------------------------------------------------

/// deliveries_per_s_batch_4 as bench_postgres measures it, in a database of its own.
double run_batches(pg_server& server, const run_length& length) {
    const std::string conninfo = server.create_database();
    pg::migrate(conninfo);
    pg::store store({.conninfo = conninfo, .pool_size = 2 * batch_threads});
    tally total;
    const run_result r = measure_inbox(store, batch_threads, "batch", length, total, unit::batch);
    require_all_processed(r, "batch");
    return r.deliveries_per_s();
}

/// How the inbox's batch run splits the records among its threads: as the relay does (by
/// context), or a thread per input partition (as the relay did before: every thread meets
/// every order).
enum class split { by_context, by_partition };

std::vector<std::vector<si::envelope>> split_records(const si::testing::order_workload& work, split how) {
    if (how == split::by_partition)
        return work.by_partition(seqinbox::test::input_partitions, seed, si::testing::placement::random_partition);
    std::vector<std::vector<si::envelope>> threads(relay_threads);
    for (const auto& record : work.records) threads[std::hash<std::string>{}(record.key.value_or("")) % relay_threads].push_back(record);
    return threads;
}

/// deliveries_per_s_batch_4 on the relay's scattered records: the inbox's batches on 4 threads,
/// in a database of its own (scattered_batches.hpp).
double run_scattered_batches(pg_server& server, std::size_t records, split how) {
    const std::string conninfo = server.create_database();
    pg::migrate(conninfo);
    pg::store store({.conninfo = conninfo, .pool_size = 2 * relay_threads + 4});
    const auto work = workload_of(records);
    const auto decls = si::yaml::load_string<std::string>(seqinbox::test::declarations_yaml, "orders.yaml", si::yaml::registry<std::string>{},
                                                          {.missing_context_id = si::yaml::relay_missing_context_id});
    const double per_s = decide_partitions(store, decls, split_records(work, how), relay_batch_records);
    require(count(conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == static_cast<long long>(work.logical),
            "scattered batches: not every message is PROCESSED");
    return per_s;
}

/// A relay run whose consumer threads all joined the group's first generation. The mock cluster
/// sometimes takes a member into a later round only (NOTES-librdkafka-mock.md: +3 to 6 s per
/// round, with no record decided meanwhile), which measures its hard-coded delays rather than the
/// relay: such a run is counted in `rebalanced` and run again, at most three runs per round (the
/// third counts whatever happened).
relay_figures run_unrebalanced_relay(pg_server& server, const options& o, si::testing::placement where, std::size_t& rebalanced) {
    for (int attempt = 1;; ++attempt) {
        auto f = run_relay(server, o.records, o.relay_options, where);
        if (f.rebalanced) ++rebalanced;
        if (!f.rebalanced || attempt == 3) return f;
    }
}

/// Per round, the figures of each run; a ratio is taken within a round, so that both sides ran
/// under the same load (the machine is shared and noisy), and printed as the median of the rounds.
struct round_figures {
    relay_figures scattered, keyed;
    double scattered_batches = 0, scattered_batches_by_partition = 0, batches = 0;
};

void print_breakdown(const std::vector<round_figures>& rounds) {
    for (const auto& [name, value] : rounds.front().scattered.per_batch) {
        std::vector<double> values;
        for (const auto& r : rounds) values.push_back(r.scattered.per_batch.at(name));
        print("scattered_" + name, median(values));
    }
}

/// The headline first: the relay on scattered input (each record on a random partition, as
/// independent producers spread them: every thread meets every order) beside the inbox's batches
/// on the same records, their ratio and the breakdown per batch; then the keyed input (each
/// order's records on the partition of its key) beside bench_postgres's batch figure.
void run(const options& o) {
    pg_server server(pg_server::commits::durable);
    {
        soci::session session(soci::postgresql, server.conninfo());
        print_server_settings(session);
    }
    std::vector<round_figures> rounds;
    std::size_t rebalanced = 0;
    for (std::size_t round = 0; round < o.rounds; ++round) {
        round_figures r;
        r.scattered = run_unrebalanced_relay(server, o, si::testing::placement::random_partition, rebalanced);
        r.scattered_batches = run_scattered_batches(server, o.records, split::by_context);
        r.scattered_batches_by_partition = run_scattered_batches(server, o.records, split::by_partition);
        r.keyed = run_unrebalanced_relay(server, o, si::testing::placement::partition_of_context, rebalanced);
        r.batches = run_batches(server, o.batch_run);
        rounds.push_back(std::move(r));
    }
    const auto medians = [&](auto of) {
        std::vector<double> values;
        for (const auto& r : rounds) values.push_back(of(r));
        return median(values);
    };
    print("rounds", o.rounds);
    print("relay_threads", relay_threads);
    print("relay_input_records", rounds.front().scattered.input_records);
    print("relay_output_records", rounds.front().scattered.output_records);
    print("relay_records_per_s_scattered", medians([](const round_figures& r) { return r.scattered.per_s(); }));
    print("deliveries_per_s_batch_4_scattered", medians([](const round_figures& r) { return r.scattered_batches; }));
    print("relay_vs_batch_4_scattered", medians([](const round_figures& r) { return r.scattered.per_s() / r.scattered_batches; }));
    print("deliveries_per_s_batch_4_scattered_by_partition", medians([](const round_figures& r) { return r.scattered_batches_by_partition; }));
    print("relay_first_decision_s", medians([](const round_figures& r) { return r.scattered.first_decision_s; }));
    print("relay_join_s", medians([](const round_figures& r) { return r.scattered.join_s; }));
    print("relay_records_per_s_scattered_from_start", medians([](const round_figures& r) { return r.scattered.per_s_from_start; }));
    print("relay_db_commits_scattered", medians([](const round_figures& r) { return static_cast<double>(r.scattered.db_commits); }));
    print_breakdown(rounds);
    print("relay_rounds_rebalanced", rebalanced);
    print("relay_records_per_s", medians([](const round_figures& r) { return r.keyed.per_s(); }));
    print("deliveries_per_s_batch_4", medians([](const round_figures& r) { return r.batches; }));
    print("relay_vs_batch_4", medians([](const round_figures& r) { return r.keyed.per_s() / r.batches; }));
    print("relay_records_per_s_from_start", medians([](const round_figures& r) { return r.keyed.per_s_from_start; }));
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "bench_relay: %s\n%s", e.what(), usage);
        return 2;
    }
    return run_guarded("bench_relay", [&] { run(o); });
}
