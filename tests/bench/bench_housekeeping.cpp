// bench_housekeeping: the housekeeping jobs (seqinbox/housekeeper.hpp) on the PostgreSQL backend
// over a preloaded backlog: instances each job deletes or marks per second alone and beside the
// delivery workload of bench_postgres, what housekeeping at its default pace costs that workload,
// and whether a batch costs more at the end of a backlog than at its start.
//
//   bench_housekeeping --conninfo CONNINFO [--closed N] [--expired N] [--seconds N] [--rounds N]
//                      [--expired-backlog N] [--quick]
//   bench_housekeeping --throwaway-server [--fast-commits] [...]
//       starts a throwaway PostgreSQL 15 (tests/postgresql) with PostgreSQL's durable defaults
//       (fsync and synchronous_commit on), as bench_postgres; --fast-commits turns both off.
//
// CONNINFO (key=value form) names a maintenance database; the program creates a database of its
// own there, migrates it, and drops it at the end, also on failure.
//
// The preload, in SQL (INSERT ... SELECT): --closed N CLOSED instances (default 700,000), closed
// 30 days ago, long past the deduplication window of their sequence (24 h), and --expired N OPEN
// instances (default 100,000) past their retention and not yet marked. Each instance has 1 to 4
// PROCESSED messages (2.5 on average) with their claims, spread over the message table as
// messages arriving over time are; every tenth expired instance also has a WAITING message with
// its record (key, value, headers). About 2 million messages with the defaults. VACUUM ANALYZE
// follows every preload.
//
// Phases, each printing its duration (<phase>_s):
//  1. alone: each job over the preload in a run_once() of its own (the store offers the other
//     jobs no work), with work_share 1 (no pause) and removal_delay 0, on a database vacuumed
//     before (VACUUM ANALYZE after each job). <job>_per_s_alone is the job's instances (deleted,
//     or marked) per second of its run, for closed_cleanup, marking and removal. A batch is the
//     job's finding query plus, for the two that delete, remove_instances: <job>_batches full
//     batches, <job>_batch_ms_median over all, _start and _end over its first and its last 20,
//     _end_vs_start the ratio of the two (target <= 1.5: a batch must not cost more as the job
//     works through the backlog).
//  2. beside_delivery: the one-by-one delivery workload of bench_postgres (inbox_workers.hpp) at
//     1 and 4 threads, --seconds per run (default 5), --rounds rounds (default 3). In a round,
//     for each job: a delivery run alone (the baseline), then one beside a run_once() at the
//     default pace (housekeeping_options' work_share) on a thread of its own in which only that
//     job is offered work, until the delivery run ends (the store then offers none: the job ends at its next batch).
//     Between the two runs the job's backlog is topped up, so that it lasts beyond the second
//     even at the job's rate alone; should it run out all the same, both runs are repeated with
//     twice the backlog (beside_delivery_windows_repeated). deliveries_per_s_N is the baselines'
//     median; delivery_ratio_during_<job>_N the median of the per-run ratios during / the
//     baseline just before (both ran under the same load); delivery_ratio_during_housekeeping_N
//     the lowest of the three (whichever job runs, processing keeps at least that share; target
//     >= 0.8 at one thread); <job>_per_s_during_N the job's rate beside the deliveries (pauses
//     included).
//  3. drain: what is left of the backlog, each job alone as in phase 1.
//  4. backlog, with --expired-backlog N (default 0: skipped; --quick: 1,000): N expired OPEN
//     instances preloaded as above, then one run_once() with the default options (15-minute
//     max_duration, default pace) but removal_delay 0: backlog_run_s, backlog_marked,
//     backlog_removed, backlog_complete (1: nothing left for the next run; target: 1 for a
//     million), and per-batch medians as in phase 1 (backlog_marking_batch_ms_*,
//     backlog_removal_batch_ms_*).
// --quick: 3,000 closed and 1,000 expired instances, one round, runs of 60 deliveries (whatever
// --closed, --expired, --rounds and --seconds say), for the CTest smoke run.
//
// Prints one `name value` pair per line, starting with server_fsync and
// server_synchronous_commit (1 on, 0 off). Exits non-zero when a run is not correct: a delivery
// not PROCESSED or a listener call missing; a run without pause that leaves preloaded work; a
// count of preloaded instances other than the jobs' reports leave, an instance kept with fewer
// messages, a message without its claim; a WAITING message of a removed instance not in the error
// sink exactly once with its record; a delivered instance or message removed (none is due).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <future>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench/inbox_workers.hpp"
#include "bench/pg_settings.hpp"
#include "postgresql/pg_test_support.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace {

namespace pg = seqinbox::postgresql;
using seqinbox::bench::clock_type;
using seqinbox::bench::elapsed_ns;
using seqinbox::bench::elapsed_s;
using seqinbox::bench::median;
using seqinbox::bench::positive_number;
using seqinbox::bench::print;
using seqinbox::bench::require;
using seqinbox::bench::run_result;
using seqinbox::bench::tally;
using seqinbox::housekeeping_job_run;
using seqinbox::housekeeping_report;
using seqinbox::instance_id;
using seqinbox::scan_position;
using seqinbox::timestamp;
using seqinbox::test::count;

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct options : seqinbox::bench::run_length {
    std::string conninfo;
    bool throwaway_server = false;
    bool fast_commits = false;  ///< the throwaway server without durable commits (as for tests)
    std::size_t closed = 700'000;
    std::size_t expired = 100'000;
    std::size_t rounds = 3;
    std::size_t expired_backlog = 0;  ///< phase 4; 0: skipped
};

constexpr const char* usage =
    "usage: bench_housekeeping (--conninfo CONNINFO | --throwaway-server [--fast-commits]) [--closed N] [--expired N]"
    " [--seconds N] [--rounds N] [--expired-backlog N] [--quick]\n";

/// Fewer instances than a batch make no full batch to time.
std::size_t instance_count(std::string_view flag, std::string_view text) {
    const std::size_t n = positive_number(flag, text);
    const std::size_t batch = seqinbox::housekeeping_options{}.batch_size;
    if (n < batch) throw std::invalid_argument(std::string(flag) + " needs at least one batch: " + std::to_string(batch));
    return n;
}

options parse_options(int argc, char** argv) {
    options o;
    o.seconds = 5;  // per delivery run
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--conninfo" && has_value)
            o.conninfo = argv[++i];
        else if (arg == "--closed" && has_value)
            o.closed = instance_count(arg, argv[++i]);
        else if (arg == "--expired" && has_value)
            o.expired = instance_count(arg, argv[++i]);
        else if (arg == "--seconds" && has_value)
            o.seconds = positive_number(arg, argv[++i]);
        else if (arg == "--rounds" && has_value)
            o.rounds = positive_number(arg, argv[++i]);
        else if (arg == "--expired-backlog" && has_value)
            o.expired_backlog = instance_count(arg, argv[++i]);
        else if (arg == "--quick")
            quick = true;
        else if (arg == "--throwaway-server")
            o.throwaway_server = true;
        else if (arg == "--fast-commits")
            o.fast_commits = true;
        else
            throw std::invalid_argument("unknown or incomplete argument '" + std::string(arg) + "'");
    }
    if (o.conninfo.empty() == !o.throwaway_server)
        throw std::invalid_argument("give exactly one of --conninfo and --throwaway-server");
    if (o.fast_commits && !o.throwaway_server) throw std::invalid_argument("--fast-commits goes with --throwaway-server");
    if (quick) {
        o.closed = 3'000;
        o.expired = 1'000;
        o.rounds = 1;
        o.deliveries = 60;
        if (o.expired_backlog == 0) o.expired_backlog = 1'000;
    }
    return o;
}

/// A database of its own on the server `server_conninfo` (key=value form) names, dropped by the
/// destructor.
class own_database {
public:
    explicit own_database(std::string server_conninfo)
        : server_(std::move(server_conninfo)), name_("seqinbox_bench_housekeeping_" + std::to_string(::getpid())) {
        soci::session server(soci::postgresql, server_);
        server << "CREATE DATABASE " + name_;
    }

    own_database(const own_database&) = delete;
    own_database& operator=(const own_database&) = delete;

    ~own_database() {
        try {
            soci::session server(soci::postgresql, server_);
            server << "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)";
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_housekeeping: could not drop database %s: %s\n", name_.c_str(), e.what());
        }
    }

    /// libpq takes the last of a repeated keyword.
    std::string conninfo() const { return server_ + " dbname=" + name_; }

private:
    std::string server_;
    std::string name_;
};

// ---------------------------------------------------------------------------------------------
// The jobs, and a store that times their batches
// ---------------------------------------------------------------------------------------------

/// The three jobs, in the order run_once() runs them.
enum class job : std::size_t { closed_cleanup, expiry_marking, removal };
constexpr std::array all_jobs{job::closed_cleanup, job::expiry_marking, job::removal};

constexpr std::size_t at(job j) { return static_cast<std::size_t>(j); }

/// The job's name in a housekeeping_report.
constexpr std::array<std::string_view, 3> report_names{"closed_cleanup", "expiry_marking", "removal"};
/// The start of the job's figure names.
constexpr std::array<std::string_view, 3> figure_stems{"closed_cleanup", "marking", "removal"};

std::string figure(job j, std::string_view rest) { return std::string(figure_stems[at(j)]) + std::string(rest); }

double ms_since(clock_type::time_point from) { return elapsed_ns(from, clock_type::now()) / 1e6; }

/// What one batch of a job took: its finding query and, for the deleting jobs, remove_instances.
struct batch_time {
    double ms = 0;
    bool full = false;  ///< it found a whole batch (the last of a job finds less)
};

/// A pg::store whose housekeeping calls time each batch, per job, and that offers a job work only
/// while asked to: for the others, the finding queries find nothing, so a running job ends after
/// its current batch. One housekeeper at a time uses it; offer() may come from any thread.
class timed_store : public pg::store {
public:
    using pg::store::store;

    std::vector<instance_id> closed_instances(timestamp now, std::span<const seqinbox::deduplication_window> windows,
                                              std::size_t limit, scan_position& after) {
        return timed_find(job::closed_cleanup, limit, [&] { return pg::store::closed_instances(now, windows, limit, after); });
    }

    std::vector<seqinbox::sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit,
                                                          scan_position& after) {
        return timed_find(job::expiry_marking, limit, [&] { return pg::store::mark_expired(now, delay, limit, after); });
    }

    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit, scan_position& after) {
        return timed_find(job::removal, limit, [&] { return pg::store::removable_instances(now, limit, after); });
    }

    /// Counted in the batch of the job whose query found `ids`.
    std::size_t remove_instances(std::span<const instance_id> ids, const seqinbox::removal_condition& condition,
                                 const seqinbox::forward_waiting& forward) {
        const auto started = clock_type::now();
        const std::size_t removed = pg::store::remove_instances(ids, condition, forward);
        batches_[at(finding_)].back().ms += ms_since(started);
        return removed;
    }

    /// Offers work to `jobs` only; {}: to none.
    void offer(std::initializer_list<job> jobs) {
        unsigned mask = 0;
        for (job j : jobs) mask |= bit(j);
        offered_ = mask;
    }
    void offer_every_job() { offer({job::closed_cleanup, job::expiry_marking, job::removal}); }

    /// Forgets the batches timed so far.
    void reset() {
        for (auto& b : batches_) b.clear();
    }

    const std::vector<batch_time>& batches(job j) const { return batches_[at(j)]; }

    /// Whether a batch of `j` found less than a whole batch since reset(): its work ran out.
    bool ran_out(job j) const {
        return std::ranges::any_of(batches(j), [](const batch_time& b) { return !b.full; });
    }

private:
    static unsigned bit(job j) { return 1U << at(j); }

    template <class Find>
    std::invoke_result_t<Find> timed_find(job j, std::size_t limit, Find find) {
        if ((offered_.load() & bit(j)) == 0) return {};
        const auto started = clock_type::now();
        auto found = find();
        batches_[at(j)].push_back({ms_since(started), found.size() == limit});
        finding_ = j;
        return found;
    }

    std::atomic<unsigned> offered_{0};
    std::array<std::vector<batch_time>, 3> batches_;
    job finding_ = job::closed_cleanup;
};

static_assert(seqinbox::housekeeping_store<timed_store>);

using housekeeper = seqinbox::basic_housekeeper<timed_store, seqinbox::memory::error_sink, seqinbox::clock::system_clock>;

static_assert(report_names[at(job::closed_cleanup)] == housekeeper::closed_cleanup_job);
static_assert(report_names[at(job::expiry_marking)] == housekeeper::expiry_marking_job);
static_assert(report_names[at(job::removal)] == housekeeper::removal_job);

const housekeeping_job_run& run_of(const housekeeping_report& report, job j) {
    const auto found = std::ranges::find(report.jobs, report_names[at(j)], &housekeeping_job_run::job);
    require(found != report.jobs.end(), "housekeeping did not run job " + std::string(report_names[at(j)]));
    return *found;
}

/// Instances the job deleted or marked per second of its run, pauses included.
double rows_per_s(const housekeeping_job_run& run) {
    return static_cast<double>(run.rows) / std::chrono::duration<double>(run.took).count();
}

constexpr std::size_t edge_batches = 20;  ///< batches at each end of a job's run whose median is printed

/// Of a job's full batches: how many, the median milliseconds of all, of the first and of the
/// last edge_batches, and the ratio of the last two.
void print_batch_times(const std::string& stem, const std::vector<batch_time>& batches) {
    std::vector<double> full;
    for (const auto& b : batches)
        if (b.full) full.push_back(b.ms);
    require(!full.empty(), stem + ": no full batch was timed");
    const auto n = static_cast<std::ptrdiff_t>(std::min(full.size(), edge_batches));
    const double start = median(std::vector<double>(full.begin(), full.begin() + n));
    const double end = median(std::vector<double>(full.end() - n, full.end()));
    print(stem + "_batches", full.size());
    print(stem + "_batch_ms_median", median(full));
    print(stem + "_batch_ms_start", start);
    print(stem + "_batch_ms_end", end);
    print(stem + "_batch_ms_end_vs_start", end / start);
}

// ---------------------------------------------------------------------------------------------
// The preloaded backlog
// ---------------------------------------------------------------------------------------------

const std::string closed_sequence = "HousekeepingClosed";
const std::string expired_sequence = "HousekeepingExpired";
const std::string late_type = "HousekeepingLate";  ///< the WAITING messages; the PROCESSED ones are HousekeepingStep1..4
const std::string preloaded_types = "message_type LIKE 'Housekeeping%'";
const std::string retention_sql = "interval '24 hours'";  ///< of every preloaded instance
constexpr std::chrono::hours closed_window{24};           ///< the deduplication window of closed_sequence

/// The windows housekeeping runs with: the delivery workload's sequence, whose instances stay
/// (they closed within their window), and closed_sequence, whose instances are all due.
std::vector<seqinbox::deduplication_window> deduplication_windows() {
    auto windows = seqinbox::deduplication_windows_of(seqinbox::bench::chain_declarations());
    windows.push_back({closed_sequence, closed_window});
    return windows;
}

void expect_count(soci::session& db, const std::string& what, const std::string& query, long long expected) {
    const long long n = count(db, query);
    require(n == expected, what + ": " + std::to_string(n) + " instead of " + std::to_string(expected));
}

/// Every forwarded message is a preloaded WAITING one with its record, and none came twice.
void verify_forwarded(const std::vector<seqinbox::failed_delivery>& forwarded, std::size_t expected) {
    require(forwarded.size() == expected, std::to_string(forwarded.size()) + " messages in the error sink for " +
                                              std::to_string(expected) + " WAITING messages of removed instances");
    std::set<std::string> ids;
    for (const auto& f : forwarded) {
        require(f.qualified_type == late_type && f.idempotence_id == f.context_id + "-late" && f.original.key == f.context_id,
                "forwarded without its record, or not a preloaded WAITING message: " + f.qualified_type + " " + f.idempotence_id);
        ids.insert(f.idempotence_id);
    }
    require(ids.size() == forwarded.size(), "a WAITING message went to the error sink more than once");
}

/// The instances preloaded for the jobs, with their messages and claims; keeps count of what each
/// job has left of them (from the housekeeping reports) and of the WAITING messages inserted, and
/// verifies the database against both.
class preload {
public:
    explicit preload(soci::session& db) : db_(&db) {}

    /// Inserts `n` instances of the kind job `j` works on: CLOSED ones, expired ones, expired ones
    /// marked for removal.
    void add(job j, std::size_t n);

    void vacuum() { *db_ << "VACUUM ANALYZE"; }

    /// Adds instances for job `j` (then vacuums) so that it has at least `needed` left.
    void top_up(job j, std::size_t needed) {
        if (left(j) >= needed) return;
        add(j, needed - left(j));
        vacuum();
    }

    std::size_t left(job j) const { return left_[at(j)]; }

    /// What a run did: marked instances pass from the marking job to the removal job.
    void account(const housekeeping_report& r) {
        require(r.closed_removed <= left(job::closed_cleanup) && r.marked <= left(job::expiry_marking) &&
                    r.expired_removed <= left(job::removal) + r.marked,
                "housekeeping deleted or marked instances that were not preloaded");
        left_[at(job::closed_cleanup)] -= r.closed_removed;
        left_[at(job::expiry_marking)] -= r.marked;
        left_[at(job::removal)] += r.marked;
        left_[at(job::removal)] -= r.expired_removed;
    }

    void verify(const seqinbox::memory::error_sink& sink) const;

private:
    soci::session* db_;
    std::size_t generation_ = 0;  ///< of add(): part of the context ids
    std::array<std::size_t, 3> left_{};
    std::size_t waiting_ = 0;  ///< WAITING messages inserted
};

/// A stored header (the store's text form: hex name '.' hex value) of SQL text expressions.
std::string header_sql(const std::string& name, const std::string& value) {
    const auto hex = [](const std::string& text) { return "encode(convert_to(" + text + ", 'UTF8'), 'hex')"; };
    return hex(name) + " || '.' || " + hex(value);
}

/// Every tenth instance added (`added`: the condition on i.id) gets a WAITING message with its
/// record, as a buffered delivery stores it; returns how many.
std::size_t insert_waiting(soci::session& db, const std::string& added) {
    const std::string id = "i.context_id || '-late'";
    soci::statement insert = (db.prepare <<
        "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at,"
        " cluster, topic, partition, \"offset\", key, value, record_time, record_headers)"
        " SELECT i.id, '" + late_type + "', " + id + ", 'WAITING', t, t, 'bench', 'orders', 0, i.id, convert_to(i.context_id, 'UTF8'),"
        " convert_to('{\"late\":' || i.id || '}', 'UTF8'), t, " + header_sql("'message-type'", "'" + late_type + "'") + " || ',' || " +
            header_sql("'idempotence-id'", id) +
            " FROM sequence_instance i CROSS JOIN LATERAL (SELECT i.created_at + interval '5 minutes' AS t) AS stored WHERE " + added +
            " AND i.id % 10 = 0");
    insert.execute(true);
    return static_cast<std::size_t>(insert.get_affected_rows());
}

void preload::add(job j, std::size_t n) {
    soci::session& db = *db_;
    long long last_before = 0;
    db << "SELECT COALESCE(max(id), 0) FROM sequence_instance", soci::into(last_before);
    const std::string added = "i.id > " + std::to_string(last_before);
    const bool closed = j == job::closed_cleanup;
    const std::string prefix = std::string(figure_stems[at(j)]) + std::to_string(++generation_) + "-";
    // Created 30 days ago, one per millisecond; closed 10 minutes after, or still OPEN.
    db << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, remove_after, closed_at)"
          " SELECT '" + (closed ? closed_sequence : expired_sequence) + "', '" + prefix + "' || g, '" +
              (closed ? "CLOSED" : "OPEN") + "', t, t + " + retention_sql + ", " +
              (j == job::removal ? "t + " + retention_sql : "NULL") + ", " + (closed ? "t + interval '10 minutes'" : "NULL") +
              " FROM generate_series(1, " + std::to_string(n) +
              ") AS g CROSS JOIN LATERAL (SELECT now() - interval '30 days' + g * interval '1 millisecond' AS t) AS created";
    // 1 to 4 PROCESSED messages each, the first of every instance, then the second...
    db << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
          " SELECT i.id, 'HousekeepingStep' || k, i.context_id || '-' || k, 'PROCESSED', i.created_at + k * interval '1 minute',"
          " i.created_at + k * interval '1 minute' FROM generate_series(1, 4) AS k JOIN sequence_instance i ON " +
              added + " AND k <= 1 + i.id % 4 ORDER BY k, i.id";
    if (!closed) waiting_ += insert_waiting(db, added);
    db << "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
          " SELECT message_type, idempotence_id, sequence_instance_id, created_at FROM sequenced_message"
          " WHERE sequence_instance_id > " + std::to_string(last_before);
    left_[at(j)] += n;
}

void preload::verify(const seqinbox::memory::error_sink& sink) const {
    soci::session& db = *db_;
    const auto left_count = [](std::size_t n) { return static_cast<long long>(n); };
    expect_count(db, "CLOSED preloaded instances", "SELECT count(*) FROM sequence_instance WHERE name = '" + closed_sequence + "'",
                 left_count(left(job::closed_cleanup)));
    expect_count(db, "expired instances not marked",
                 "SELECT count(*) FROM sequence_instance WHERE name = '" + expired_sequence + "' AND remove_after IS NULL",
                 left_count(left(job::expiry_marking)));
    expect_count(db, "expired instances marked",
                 "SELECT count(*) FROM sequence_instance WHERE name = '" + expired_sequence + "' AND remove_after IS NOT NULL",
                 left_count(left(job::removal)));
    const long long messages = count(db, "SELECT count(*) FROM sequenced_message WHERE " + preloaded_types);
    expect_count(db, "messages of the preloaded instances left (as add() made them)",
                 "SELECT CAST(COALESCE(sum(1 + id % 4 + CASE WHEN name = '" + expired_sequence +
                     "' AND id % 10 = 0 THEN 1 ELSE 0 END), 0) AS bigint) FROM sequence_instance WHERE name IN ('" + closed_sequence +
                     "', '" + expired_sequence + "')",
                 messages);
    expect_count(db, "claims of the preloaded messages left",
                 "SELECT count(*) FROM sequential_inbox_idempotence WHERE " + preloaded_types, messages);
    const long long waiting_left = count(db, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING' AND " + preloaded_types);
    verify_forwarded(sink.records(), waiting_ - static_cast<std::size_t>(waiting_left));
}

// ---------------------------------------------------------------------------------------------
// The phases
// ---------------------------------------------------------------------------------------------

/// Default options, but every preloaded instance is due at once.
seqinbox::housekeeping_options default_pace() {
    seqinbox::housekeeping_options o;
    o.removal_delay = std::chrono::seconds(0);
    o.deduplication_windows = deduplication_windows();
    return o;
}

/// No pause, and no bound that would stop a job before its work is done.
seqinbox::housekeeping_options unpaced() {
    auto o = default_pace();
    o.work_share = 1;
    o.max_duration = std::chrono::hours(24);
    return o;
}

/// Job `j` without pause, in a run_once() that offers the other jobs no work: it must do all of its
/// work. Then VACUUM ANALYZE, so that the next job starts on a vacuumed database.
housekeeping_job_run run_alone(timed_store& store, seqinbox::memory::error_sink& sink, preload& data, job j) {
    store.reset();
    store.offer({j});
    housekeeper hk(store, sink, unpaced());
    const housekeeping_report report = hk.run_once();
    data.account(report);
    require(report.complete && report.skipped.empty() && data.left(j) == 0,
            std::string(report_names[at(j)]) + " without pause left preloaded work");
    data.vacuum();
    return run_of(report, j);
}

/// Phase 1; returns each job's rate alone.
std::array<double, 3> run_each_alone(timed_store& store, seqinbox::memory::error_sink& sink, preload& data, soci::session& db,
                                     const options& o) {
    auto started = clock_type::now();
    data.add(job::closed_cleanup, o.closed);
    data.add(job::expiry_marking, o.expired);
    data.vacuum();
    print("preloaded_closed", o.closed);
    print("preloaded_expired", o.expired);
    print("preloaded_messages", static_cast<std::size_t>(count(db, "SELECT count(*) FROM sequenced_message")));
    print("preload_s", elapsed_s(started, clock_type::now()));
    started = clock_type::now();
    std::array<double, 3> rates{};
    for (job j : all_jobs) {
        rates[at(j)] = rows_per_s(run_alone(store, sink, data, j));
        print(figure(j, "_per_s_alone"), rates[at(j)]);
        print_batch_times(figure(j, ""), store.batches(j));
    }
    data.verify(sink);
    print("forwarded_alone", sink.size());
    print("alone_s", elapsed_s(started, clock_type::now()));
    return rates;
}

/// One delivery run of the workload, every delivery PROCESSED at once.
run_result deliver(timed_store& store, std::size_t threads, const std::string& name, const options& o, tally& total) {
    const run_result r = seqinbox::bench::measure_inbox(store, threads, name, o, total);
    seqinbox::bench::require_all_processed(r, name);
    return r;
}

/// Runs `body` beside a run_once() at the default pace on a thread of its own, in which job `j`
/// alone is offered work until `body` returns.
template <class Body>
housekeeping_report beside(timed_store& store, seqinbox::memory::error_sink& sink, job j, Body body) {
    housekeeper hk(store, sink, default_pace());
    store.reset();
    store.offer({j});
    auto running = std::async(std::launch::async, [&hk] { return hk.run_once(); });
    {
        struct withdraw_at_exit {
            timed_store& from;
            ~withdraw_at_exit() { from.offer({}); }
        } withdraw{store};
        body();
    }
    return running.get();
}

/// Instances a job is given before a run beside deliveries: what it does at `rate` in the
/// baseline's time and one second more. At its rate alone, that is about twice what it does at
/// the default pace.
std::size_t backlog_for(double rate, const run_result& baseline) {
    return static_cast<std::size_t>(rate * (baseline.seconds + 1)) + 10 * seqinbox::housekeeping_options{}.batch_size;
}

/// One measurement of phase 2.
struct window {
    double baseline = 0;  ///< deliveries/s alone
    double ratio = 0;     ///< deliveries/s beside the job / baseline
    double rate = 0;      ///< of the job, beside the deliveries
    int attempts = 1;
};

constexpr int window_attempts = 3;

/// A delivery run alone, then one beside job `j`, whose backlog is topped up in between for
/// `rate` (the job's rate alone at first). A job whose backlog ran out before the deliveries
/// ended (its rate alone was measured slower than it goes now, e.g. beside an autovacuum)
/// measures nothing: the window is run again with `rate` doubled.
window run_window(timed_store& store, seqinbox::memory::error_sink& sink, preload& data, job j, double& rate, std::size_t threads,
                  const std::string& name, const options& o, tally& total) {
    for (int attempt = 1;; ++attempt) {
        const std::string run_name = name + "_a" + std::to_string(attempt);  // contexts of their own
        const run_result baseline = deliver(store, threads, run_name + "_baseline", o, total);
        data.top_up(j, backlog_for(rate, baseline));
        run_result during;
        const housekeeping_report report = beside(store, sink, j, [&] { during = deliver(store, threads, run_name, o, total); });
        data.account(report);
        const double alone = baseline.deliveries_per_s();
        if (!store.ran_out(j)) return {alone, during.deliveries_per_s() / alone, rows_per_s(run_of(report, j)), attempt};
        require(attempt < window_attempts, name + ": the job's backlog ran out before the deliveries ended, every time");
        rate *= 2;
    }
}

/// Per thread count of phase 2: the baselines, and per job the per-run ratios and rates.
struct beside_runs {
    std::vector<double> baselines;
    std::array<std::vector<double>, 3> ratios, rates;
};

/// "_<threads>", the end of a figure's name. (Built by appending: GCC 12 warns of a false
/// -Wrestrict in `"_" + std::to_string(...)` inlined into a large function.)
std::string threads_suffix(std::size_t threads) {
    std::string suffix = "_";
    suffix += std::to_string(threads);
    return suffix;
}

void print_beside(const beside_runs& runs, std::size_t threads) {
    const std::string n = threads_suffix(threads);
    print("deliveries_per_s" + n, median(runs.baselines));
    double lowest = std::numeric_limits<double>::infinity();
    for (job j : all_jobs) {
        const double ratio = median(runs.ratios[at(j)]);
        lowest = std::min(lowest, ratio);
        print("delivery_ratio_during_" + figure(j, n), ratio);
        print(figure(j, "_per_s_during" + n), median(runs.rates[at(j)]));
    }
    print("delivery_ratio_during_housekeeping" + n, lowest);
}

/// Phase 2.
void run_beside_delivery(timed_store& store, seqinbox::memory::error_sink& sink, preload& data, std::array<double, 3> rates,
                         const options& o, tally& total) {
    const auto started = clock_type::now();
    std::size_t repeated = 0;
    for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
        beside_runs runs;
        for (std::size_t round = 0; round < o.rounds; ++round)
            for (job j : all_jobs) {
                const std::string name = figure(j, threads_suffix(threads) + "_r" + std::to_string(round));
                const window w = run_window(store, sink, data, j, rates[at(j)], threads, name, o, total);
                runs.baselines.push_back(w.baseline);
                runs.ratios[at(j)].push_back(w.ratio);
                runs.rates[at(j)].push_back(w.rate);
                repeated += static_cast<std::size_t>(w.attempts - 1);
            }
        print_beside(runs, threads);
    }
    data.verify(sink);
    print("beside_delivery_windows_repeated", repeated);
    print("beside_delivery_s", elapsed_s(started, clock_type::now()));
}

/// Phase 4: a backlog of `n` expired instances, one run at the default pace.
void run_backlog(timed_store& store, seqinbox::memory::error_sink& sink, preload& data, std::size_t n) {
    auto started = clock_type::now();
    data.add(job::expiry_marking, n);
    data.vacuum();
    print("backlog_expired", n);
    print("backlog_preload_s", elapsed_s(started, clock_type::now()));
    store.reset();
    store.offer_every_job();
    housekeeper hk(store, sink, default_pace());
    started = clock_type::now();
    const housekeeping_report report = hk.run_once();
    print("backlog_run_s", elapsed_s(started, clock_type::now()));
    data.account(report);
    print("backlog_marked", report.marked);
    print("backlog_removed", report.expired_removed);
    print("backlog_forwarded", report.forwarded);
    print("backlog_complete", std::size_t{report.complete ? 1U : 0U});
    print_batch_times("backlog_marking", store.batches(job::expiry_marking));
    print_batch_times("backlog_removal", store.batches(job::removal));
    data.verify(sink);
}

/// Housekeeping left every delivered instance, message and claim alone (none is due yet).
void verify_deliveries(soci::session& db, const tally& total) {
    const std::string sequence = "name = '" + seqinbox::bench::bench_sequence + "'";
    expect_count(db, "delivered instances, CLOSED", "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED' AND " + sequence,
                 static_cast<long long>(total.contexts));
    const std::string delivered = "message_type LIKE 'Bench%'";
    expect_count(db, "delivered messages, PROCESSED",
                 "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED' AND " + delivered,
                 static_cast<long long>(total.deliveries));
    expect_count(db, "claims of delivered messages", "SELECT count(*) FROM sequential_inbox_idempotence WHERE " + delivered,
                 static_cast<long long>(total.deliveries));
}

void run(const options& o) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows as it comes, also into a pipe
    using seqinbox::test::pg_server;
    std::optional<pg_server> server;
    if (o.throwaway_server) server.emplace(o.fast_commits ? pg_server::commits::not_durable : pg_server::commits::durable);
    const own_database db(server ? server->conninfo() : o.conninfo);
    pg::migrate(db.conninfo());
    soci::session session(soci::postgresql, db.conninfo());
    seqinbox::bench::print_server_settings(session);
    seqinbox::memory::error_sink sink;
    preload data(session);
    tally total;
    {
        pg::store_options s;
        s.conninfo = db.conninfo();
        s.pool_size = 10;  // two per delivery thread, and the housekeeper's job lock and batch
        timed_store store(s);
        const auto alone = run_each_alone(store, sink, data, session, o);
        run_beside_delivery(store, sink, data, alone, o, total);
        const auto started = clock_type::now();
        for (job j : all_jobs) run_alone(store, sink, data, j);
        data.verify(sink);
        print("drain_s", elapsed_s(started, clock_type::now()));
        if (o.expired_backlog > 0) run_backlog(store, sink, data, o.expired_backlog);
    }
    verify_deliveries(session, total);
    print("verified_deliveries", total.deliveries);
    print("verified_forwarded", sink.size());
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "bench_housekeeping: %s\n%s", e.what(), usage);
        return 2;
    }
    return seqinbox::bench::run_guarded("bench_housekeeping", [&] { run(o); });
}
