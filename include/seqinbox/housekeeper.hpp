#pragma once
// Housekeeping (docs/operations.md): three jobs, each run by one service instance at a time (the store's job
// lock), each bounded by a maximum duration and resumable (work is found by state, and every
// batch commits on its own):
//  - closed cleanup: delete CLOSED instances with their messages and claims once their
//    deduplication window has passed (until then late duplicates are recognised);
//  - expiry marking: OPEN instances past retain_until get remove_after = retain_until + delay,
//    logged loudly;
//  - removal: delete OPEN instances whose remove_after passed.
// Nothing vanishes silently: before an instance is deleted, each of its WAITING messages goes to
// the error sink (in the transaction that deletes it; a failing sink keeps the instance).
//
// Thread-safety: one housekeeper object per thread; any number of them (in any number of
// processes) may share a store.
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/clock/concept.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/error_sink/concept.hpp"
#include "seqinbox/logger/concept.hpp"
#include "seqinbox/logger/null_logger.hpp"
#include "seqinbox/store/housekeeping.hpp"

namespace seqinbox {

struct housekeeping_options {
    std::chrono::seconds removal_delay{std::chrono::hours(24)};  ///< after retain_until, before removal
    std::size_t batch_size = 100;
    std::chrono::seconds max_duration{15 * 60};  ///< per run; the next run resumes
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

/// One job of one run: how long it took and how many instances it deleted.
struct housekeeping_job_run {
    std::string job;
    std::chrono::nanoseconds took{0};
    std::size_t deleted = 0;
};

struct housekeeping_report {
    std::vector<housekeeping_job_run> jobs;  ///< the jobs that ran (not the skipped ones)
    std::size_t closed_removed = 0;   ///< CLOSED instances deleted
    std::size_t marked = 0;           ///< OPEN instances past retention marked for removal
    std::size_t expired_removed = 0;  ///< instances deleted after their remove_after
    std::size_t forwarded = 0;        ///< WAITING messages sent to the error sink first
    std::vector<std::string> skipped;  ///< jobs another service instance was running
    bool complete = true;              ///< false: stopped at max_duration with work left
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
        : store_(&store), sink_(&sink), options_(options), clock_(std::move(clock)), logger_(std::move(logger)) {}

    /// Runs the three jobs once, each up to the shared time bound.
    housekeeping_report run_once() {
        housekeeping_report report;
        const timestamp started = clock_.now();
        auto in_time = [&] { return clock_.now() - started < options_.max_duration; };
        run_job(closed_cleanup_job, report, report.closed_removed, in_time,
                [&] {
                    const auto ids = store_->closed_instances(clock_.now(), options_.deduplication_windows, options_.batch_size);
                    return remove_all(ids, report.closed_removed, report);
                });
        run_job(expiry_marking_job, report, report.marked, in_time, [&] { return mark_batch(report); });
        run_job(removal_job, report, report.expired_removed, in_time,
                [&] { return remove_all(store_->removable_instances(clock_.now(), options_.batch_size), report.expired_removed, report); });
        return report;
    }

private:
    /// Runs `batch` (which returns false when it found no more work) while time is left.
    /// `progress` is the report's count of what the job does (deleted or marked instances).
    template <class InTime, class Batch>
    void run_job(const char* job, housekeeping_report& report, const std::size_t& progress, InTime in_time, Batch batch) {
        auto held = store_->try_lock_job(std::string("seqinbox.") + job);
        if (!held) {
            report.skipped.emplace_back(job);
            return;
        }
        const auto started = std::chrono::steady_clock::now();
        const std::size_t before = progress;
        bool more = batch();
        while (more && in_time()) more = batch();
        if (more) {
            report.complete = false;
            log(log_level::info, [&] { return std::string("housekeeping job ") + job + " reached its maximum duration; the next run resumes"; });
        }
        const bool deletes = std::string_view(job) != expiry_marking_job;
        report.jobs.push_back({job, std::chrono::steady_clock::now() - started, deletes ? progress - before : 0});
    }

    bool remove_all(const std::vector<instance_id>& ids, std::size_t& removed, housekeeping_report& report) {
        for (instance_id id : ids)
            if (store_->remove_instance(id, [&](const sequence_instance& instance, std::span<const message_record> waiting) {
                    forward(instance, waiting);
                    report.forwarded += waiting.size();
                }))
                ++removed;
        return ids.size() == options_.batch_size;
    }

    bool mark_batch(housekeeping_report& report) {
        const auto marked = store_->mark_expired(clock_.now(), options_.removal_delay, options_.batch_size);
        for (const auto& instance : marked)
            log(log_level::warn, [&] {
                return "EXPIRED sequence instance " + std::to_string(instance.id) + " (" + detail::loggable(instance.sequence) + ", context " +
                       detail::loggable(instance.context_id) +
                       ") is past its retention; it will be removed, its waiting messages sent to the error sink";
            });
        report.marked += marked.size();
        return marked.size() == options_.batch_size;
    }

    void forward(const sequence_instance& instance, std::span<const message_record> waiting) {
        for (const auto& row : waiting) {
            sink_->publish({row.payload.value_or(envelope{}),
                            "removed by housekeeping: sequence instance (" + instance.sequence + ", " + instance.context_id +
                                (instance.state == instance_state::closed ? ") was closed" : ") passed its retention") +
                                " while this message was waiting",
                            row.type, row.idempotence_id, instance.context_id});
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
