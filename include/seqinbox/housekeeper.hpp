#pragma once
// Housekeeping (docs/operations.md): three jobs, each run by one service instance at a time (the
// store's job lock), each within its share of a run's maximum duration, resumable (work is found
// by state), in batches of one transaction each, paced so that processing keeps the database:
//  - closed cleanup: delete CLOSED instances with their messages and claims once their
//    deduplication window has passed (until then late duplicates are recognised);
//  - expiry marking: OPEN instances past retain_until get remove_after = retain_until + delay,
//    logged loudly;
//  - removal: delete OPEN instances whose remove_after passed.
// Each batch reads on from where the previous one stopped (scan_position), so its cost does not
// grow with the work done before it. Nothing vanishes silently: before an instance is deleted,
// each of its WAITING messages goes to the error sink (in the transaction that deletes its
// batch, a bounded page at a time; a failing sink keeps the whole batch). An instance that changed
// after its job found it (closed meanwhile) is checked again under its lock and kept; one a writer
// holds is passed over without waiting (the next run finds it again).
//
// A run can be stopped (run_once's stop token): it ends between two batches, a pause of the pace
// included, and reports itself incomplete; the next run resumes.
//
// Thread-safety: one housekeeper object per thread (run_once's stop token may be requested from
// any thread); any number of them (in any number of processes) may share a store.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/clock/concept.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/detail/stoppable_wait.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/error_sink/concept.hpp"
#include "seqinbox/logger/concept.hpp"
#include "seqinbox/logger/null_logger.hpp"
#include "seqinbox/store/housekeeping.hpp"

namespace seqinbox {

struct housekeeping_options {
    std::chrono::seconds removal_delay{std::chrono::hours(24)};  ///< after retain_until, before removal (0: at once)
    std::size_t batch_size = 100;  ///< instances per batch: one transaction each
    /// Bound of one run, shared by the jobs: each gets an equal share of the time left when it
    /// starts (so every job progresses on every run, and one that finishes early leaves its time
    /// to the next). The next run resumes.
    std::chrono::seconds max_duration{15 * 60};
    /// The pace: the share of its time a job spends on batches. After a batch that took t, the
    /// job pauses t * (1 - work_share) / work_share, so that processing, which shares the
    /// database's WAL flushes and CPU, keeps most of them. 1: no pause. In (0, 1].
    double work_share = 0.2;
    /// Per sequence, how long CLOSED instances are kept after closing (deduplication_windows_of
    /// gives the declared ones). A sequence not listed, e.g. one no longer declared, keeps them
    /// for the retention its instances were created with.
    std::vector<deduplication_window> deduplication_windows{};
};

/// The deduplication window of every declared sequence (its retention unless declared).
template <class Message>
std::vector<deduplication_window> deduplication_windows_of(const declarations<Message>& decls) {
    std::vector<deduplication_window> windows;
    for (const auto& seq : decls.sequences) windows.push_back({seq.name, seq.kept_closed_for()});
    return windows;
}

/// One job of one run.
struct housekeeping_job_run {
    std::string job;
    std::chrono::nanoseconds took{0};    ///< from the job's start to its end, pauses included
    std::chrono::nanoseconds paused{0};  ///< of `took`, the pauses of the pace
    std::size_t rows = 0;                ///< instances deleted (cleanup, removal) or marked (marking)
    std::size_t batches = 0;
    bool complete = true;  ///< false: its share of max_duration ended, or a stop came, with work left
};

struct housekeeping_report {
    std::vector<housekeeping_job_run> jobs;  ///< the jobs that ran (not the skipped ones), in run order
    std::size_t closed_removed = 0;   ///< CLOSED instances deleted
    std::size_t marked = 0;           ///< OPEN instances past retention marked for removal
    std::size_t expired_removed = 0;  ///< instances deleted after their remove_after
    std::size_t forwarded = 0;        ///< WAITING messages sent to the error sink first
    std::vector<std::string> skipped;  ///< jobs another service instance was running
    bool complete = true;              ///< false: a job stopped at its share of max_duration, or on request, with work left
    bool stopped = false;              ///< a stop request ended the run early (complete is false then)
};

template <class Store, class ErrorSink, class Clock = clock::system_clock, class Logger = logger::null_logger>
class basic_housekeeper {
    static_assert(housekeeping_store<Store>,
                  "seqinbox: the Store policy must model seqinbox::housekeeping_store (seqinbox/store/housekeeping.hpp)");
    static_assert(error_sink_policy<ErrorSink>, "seqinbox: the ErrorSink policy must model seqinbox::error_sink_policy (seqinbox/error_sink/concept.hpp)");
    static_assert(clock_policy<Clock>, "seqinbox: the Clock policy must model seqinbox::clock_policy (seqinbox/clock/concept.hpp)");
    static_assert(logger_policy<Logger>, "seqinbox: the Logger policy must model seqinbox::logger_policy (seqinbox/logger/concept.hpp)");

public:
    static constexpr const char* closed_cleanup_job = "closed_cleanup";
    static constexpr const char* expiry_marking_job = "expiry_marking";
    static constexpr const char* removal_job = "removal";

    basic_housekeeper(Store& store, ErrorSink& sink, housekeeping_options options = {}, Clock clock = {}, Logger logger = {})
        : store_(&store), sink_(&sink), options_(checked(std::move(options))), clock_(std::move(clock)), logger_(std::move(logger)) {}

    /// Runs the three jobs once, each within its share of max_duration (at least one batch).
    /// Once `stop` is requested the run ends after the batch in progress (a pause ends at once)
    /// and the jobs not started yet do not start: complete and stopped say so.
    housekeeping_report run_once(std::stop_token stop = {}) {
        housekeeping_report report;
        const timestamp deadline = clock_.now() + options_.max_duration;
        auto share_left = [&, jobs_left = 3]() mutable {
            const auto left = std::max(deadline - clock_.now(), timestamp::duration::zero());
            return left / jobs_left--;
        };
        run_job(closed_cleanup_job, report, report.closed_removed, share_left(), stop, [&](scan_position& after) {
            const timestamp now = clock_.now();
            return remove_batch(store_->closed_instances(now, options_.deduplication_windows, options_.batch_size, after),
                                removal_condition::window_passed(now, options_.deduplication_windows), report);
        });
        run_job(expiry_marking_job, report, report.marked, share_left(), stop, [&](scan_position& after) { return mark_batch(after); });
        run_job(removal_job, report, report.expired_removed, share_left(), stop, [&](scan_position& after) {
            const timestamp now = clock_.now();
            return remove_batch(store_->removable_instances(now, options_.batch_size, after), removal_condition::expired(now), report);
        });
        return report;
    }

private:
    /// What one batch did: `rows` deleted or marked out of `found`.
    struct batch_result {
        std::size_t found = 0;
        std::size_t rows = 0;
    };

    static housekeeping_options checked(housekeeping_options o) {
        if (o.batch_size == 0) throw error(error_category::misuse, "housekeeping_options: batch_size must be at least 1, not 0");
        if (!(o.work_share > 0 && o.work_share <= 1))
            throw error(error_category::misuse, "housekeeping_options: work_share must be in (0, 1], not " + std::to_string(o.work_share));
        if (o.removal_delay.count() < 0 || o.max_duration.count() < 0)
            throw error(error_category::misuse, "housekeeping_options: removal_delay and max_duration must not be negative");
        return o;
    }

    /// Runs `batch` (given the job's scan position) until a batch finds less than a full one, the
    /// job's `share` of the run has passed or `stop` is requested; paces between batches.
    /// `total` is the report's count of what the job does.
    template <class Batch>
    void run_job(const char* job, housekeeping_report& report, std::size_t& total, timestamp::duration share, const std::stop_token& stop,
                 Batch batch) {
        if (stop.stop_requested()) {
            stopped(report);
            return;
        }
        auto held = store_->try_lock_job(std::string("seqinbox.") + job);
        if (!held) {
            report.skipped.emplace_back(job);
            return;
        }
        housekeeping_job_run run{job};
        const auto started = std::chrono::steady_clock::now();
        const timestamp deadline = clock_.now() + share;
        scan_position after;
        for (bool more = true; more;) {
            if (run.batches > 0 && !held.renew()) {
                run.complete = report.complete = false;
                log(log_level::warn, [&] {
                    return std::string("housekeeping job ") + job +
                           " lost its lock (its lease expired between two batches and another service instance took it): it stops here";
                });
                break;
            }
            const auto batch_started = std::chrono::steady_clock::now();
            const batch_result done = batch(after);
            ++run.batches;
            run.rows += done.rows;
            more = done.found == options_.batch_size;
            if (more && clock_.now() >= deadline) {
                run.complete = report.complete = false;
                log(log_level::info, [&] { return std::string("housekeeping job ") + job + " reached its share of the maximum duration; the next run resumes"; });
                break;
            }
            if (more) run.paused += pause_after(std::chrono::steady_clock::now() - batch_started, stop);
            if (more && stop.stop_requested()) {
                run.complete = false;
                stopped(report);
                log(log_level::info, [&] { return std::string("housekeeping job ") + job + " stopped on request; the next run resumes"; });
                break;
            }
        }
        total += run.rows;
        run.took = std::chrono::steady_clock::now() - started;
        report.jobs.push_back(std::move(run));
    }

    static void stopped(housekeeping_report& report) {
        report.complete = false;
        report.stopped = true;
    }

    /// Waits for the pace after a batch that took `busy`, or until `stop`; returns the pause (cut
    /// short by a stop).
    std::chrono::nanoseconds pause_after(std::chrono::nanoseconds busy, const std::stop_token& stop) const {
        if (options_.work_share >= 1) return std::chrono::nanoseconds::zero();
        const auto pause = std::chrono::duration_cast<std::chrono::nanoseconds>(busy * ((1 - options_.work_share) / options_.work_share));
        const auto started = std::chrono::steady_clock::now();
        detail::wait_unless_stopped(pause, stop);
        return std::min<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started, pause);  // the pace's, not the timer's slack
    }

    /// Removes the instances `ids` a job found, if `condition` (how it found them) still holds.
    batch_result remove_batch(const std::vector<instance_id>& ids, const removal_condition& condition, housekeeping_report& report) {
        if (ids.empty()) return {};
        std::size_t forwarded = 0;
        const std::size_t removed = store_->remove_instances(ids, condition, [&](const sequence_instance& instance, std::span<const message_record> waiting) {
            forward(instance, waiting);
            forwarded += waiting.size();
        });
        report.forwarded += forwarded;  // counted once the batch committed: a failing sink keeps it all
        return {ids.size(), removed};
    }

    batch_result mark_batch(scan_position& after) {
        const auto marked = store_->mark_expired(clock_.now(), options_.removal_delay, options_.batch_size, after);
        for (const auto& instance : marked)
            log(log_level::warn, [&] {
                return "EXPIRED sequence instance " + std::to_string(instance.id) + " (" + detail::loggable(instance.sequence) + ", context " +
                       detail::loggable(instance.context_id) +
                       ") is past its retention; it will be removed, its waiting messages sent to the error sink";
            });
        return {marked.size(), marked.size()};
    }

    void forward(const sequence_instance& instance, std::span<const message_record> waiting) {
        for (const auto& row : waiting) {
            sink_->publish({row.payload.value_or(envelope{}),
                            "removed by housekeeping: sequence instance (" + instance.sequence + ", " + instance.context_id +
                                (instance.state == instance_state::closed ? ") was closed" : ") passed its retention") +
                                " while this message was waiting",
                            row.type, row.idempotence_id, instance.context_id, failure_kind::removed_by_housekeeping});
            log(log_level::warn, [&] {
                return "forwarded waiting " + detail::loggable_message(row.type, row.idempotence_id) + " to the error sink before removal";
            });
        }
    }

    template <class Build>
    void log(log_level level, Build build) {
        if (logger_.enabled(level)) logger_.log(level, build());
    }

    Store* store_;
    ErrorSink* sink_;
    housekeeping_options options_;
    Clock clock_;
    Logger logger_;
};

}  // namespace seqinbox
