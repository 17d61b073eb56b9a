#pragma once
// A metrics sink feeding a Prometheus registry. The inbox holds its sink by value, so the sink
// is a cheap handle: every copy feeds the same shared registry, which several inboxes and an
// HTTP endpoint (serving registry::render()) can share. Thread-safe.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/metrics/concept.hpp"
#include "seqinbox/metrics/registry.hpp"
#include "seqinbox/store/views.hpp"

namespace seqinbox::metrics {

struct prometheus_options {
    std::vector<double> handle_buckets = default_duration_buckets();  ///< seconds to handle a delivery
    std::vector<double> release_wait_buckets = default_wait_buckets();  ///< seconds a message waited
    std::vector<double> job_buckets = default_wait_buckets();           ///< seconds a housekeeping job ran
};

/// Per message type (label `type`, the qualified type; for rejected deliveries the rejection's
/// name, see seqinbox/metrics/concept.hpp): seqinbox_consumed_messages_total,
/// seqinbox_buffered_messages_total, seqinbox_released_messages_total,
/// seqinbox_failed_messages_total, seqinbox_duplicate_deliveries_total (counters),
/// seqinbox_release_wait_seconds and seqinbox_handle_seconds (histograms).
/// Per sequence and overflow policy: seqinbox_buffer_overflows_total (counter, labels `sequence`, `policy`).
/// Per numbered sequence and gap policy: seqinbox_gap_timeouts_total (counter, labels `sequence`, `policy`).
/// Operations: seqinbox_pending_action_seconds (histogram, per instance acted on);
/// housekeeping(report) feeds seqinbox_housekeeping_deleted_instances_total and
/// seqinbox_housekeeping_job_seconds (label `job`); refresh(store, now) sets the gauges
/// seqinbox_waiting_messages (label `type`), seqinbox_expiring_instances and
/// seqinbox_expired_instances (label `sequence`) from the store's read views.
class prometheus_metrics {
public:
    /// A sink on a registry of its own; reach it through shared_registry().
    prometheus_metrics() : prometheus_metrics(std::make_shared<registry>()) {}

    /// Registers the families on `shared` (again: a second sink on it reuses them). Throws
    /// error(misuse) if `shared` holds one of the names with another definition.
    explicit prometheus_metrics(std::shared_ptr<registry> shared, const prometheus_options& options = {})
        : registry_(std::move(shared)),
          consumed_(&count("seqinbox_consumed_messages_total", "Messages whose listener completed.")),
          buffered_(&count("seqinbox_buffered_messages_total", "Messages that started waiting for their predecessors.")),
          released_(&count("seqinbox_released_messages_total", "Waiting messages released and handled.")),
          failed_(&count("seqinbox_failed_messages_total", "Messages whose listener threw or that were rejected.")),
          duplicate_(&count("seqinbox_duplicate_deliveries_total", "Deliveries skipped as already handled.")),
          release_wait_(&registry_->histogram("seqinbox_release_wait_seconds", "Time a message waited until its release.",
                                              {"type"}, options.release_wait_buckets)),
          handle_(&registry_->histogram("seqinbox_handle_seconds", "Time to handle one delivery end to end.", {"type"},
                                        options.handle_buckets)),
          action_(&registry_->histogram("seqinbox_pending_action_seconds", "Time to execute the pending actions of one instance.", {},
                                        options.handle_buckets)),
          job_(&registry_->histogram("seqinbox_housekeeping_job_seconds", "Time one housekeeping job ran.", {"job"},
                                     options.job_buckets)),
          deleted_(&registry_->counter("seqinbox_housekeeping_deleted_instances_total", "Instances deleted by housekeeping.", {"job"})),
          overflows_(&registry_->counter("seqinbox_buffer_overflows_total",
                                         "Messages that had to wait in an instance whose buffer was full (maxWaiting).",
                                         {"sequence", "policy"})),
          gaps_(&registry_->counter("seqinbox_gap_timeouts_total",
                                    "Gaps of numbered sequences past their gap timeout (a held gap counts at every job run).",
                                    {"sequence", "policy"})),
          waiting_(&registry_->gauge("seqinbox_waiting_messages", "Messages waiting for their predecessors.", {"type"})),
          expiring_(&registry_->gauge("seqinbox_expiring_instances", "OPEN instances past a share of their retention.", {"sequence"})),
          expired_(&registry_->gauge("seqinbox_expired_instances", "OPEN instances past their retention.", {"sequence"})) {}

    void consumed(std::string_view type) { consumed_->inc({type}); }
    void buffered(std::string_view type) { buffered_->inc({type}); }
    void released(std::string_view type, std::chrono::nanoseconds wait) {
        released_->inc({type});
        release_wait_->observe({type}, seconds(wait));
    }
    void failed(std::string_view type) { failed_->inc({type}); }
    void duplicate(std::string_view type) { duplicate_->inc({type}); }
    void buffer_overflow(std::string_view sequence, overflow_policy policy) { overflows_->inc({sequence, to_string(policy)}); }
    void gap_timed_out(std::string_view sequence, gap_policy policy) { gaps_->inc({sequence, to_string(policy)}); }
    void handled(std::string_view type, std::chrono::nanoseconds took) { handle_->observe({type}, seconds(took)); }
    void action_executed(std::chrono::nanoseconds took) { action_->observe({}, seconds(took)); }

    void housekeeping(const housekeeping_report& report) {
        for (const auto& run : report.jobs) {
            job_->observe({run.job}, seconds(run.took));
            if (run.job != "expiry_marking") deleted_->inc({run.job}, static_cast<double>(run.rows));  // marking deletes nothing
        }
    }

    /// Sets the gauges from the store's read views; series of types and sequences that no longer
    /// have any fall to 0 rather than keep a stale value. Call it on a schedule or before scrapes.
    template <view_store Store>
    void refresh(Store& store, timestamp now, double expiring_share = 0.75) {
        std::map<std::string, double> waiting;
        for (const auto& c : store.message_counts()) waiting[c.type] += c.state == message_state::waiting ? static_cast<double>(c.count) : 0;
        std::map<std::string, std::pair<double, double>> retention;
        for (const auto& c : store.retention_counts(now, expiring_share))
            retention[c.sequence] = {static_cast<double>(c.expiring), static_cast<double>(c.expired)};
        std::lock_guard lock(refreshed_->mutex);
        for (const auto& type : refreshed_->types) waiting.try_emplace(type, 0);
        for (const auto& sequence : refreshed_->sequences) retention.try_emplace(sequence, std::pair{0.0, 0.0});
        for (const auto& [type, n] : waiting) {
            waiting_->set({type}, n);
            refreshed_->types.insert(type);
        }
        for (const auto& [sequence, counts] : retention) {
            expiring_->set({sequence}, counts.first);
            expired_->set({sequence}, counts.second);
            refreshed_->sequences.insert(sequence);
        }
    }

    /// The registry this sink feeds, for rendering or for registering further metrics.
    const std::shared_ptr<registry>& shared_registry() const noexcept { return registry_; }

private:
    static double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

    counter_family& count(std::string_view name, std::string_view help) { return registry_->counter(name, help, {"type"}); }

    std::shared_ptr<registry> registry_;
    counter_family* consumed_;  // owned by *registry_, which outlives every copy of this handle
    counter_family* buffered_;
    counter_family* released_;
    counter_family* failed_;
    counter_family* duplicate_;
    histogram_family* release_wait_;
    histogram_family* handle_;
    histogram_family* action_;
    histogram_family* job_;
    counter_family* deleted_;
    counter_family* overflows_;
    counter_family* gaps_;
    gauge_family* waiting_;
    gauge_family* expiring_;
    gauge_family* expired_;
    struct refreshed_labels {  // shared by the copies of this handle
        std::mutex mutex;
        std::set<std::string> types, sequences;
    };
    std::shared_ptr<refreshed_labels> refreshed_ = std::make_shared<refreshed_labels>();
};

static_assert(metrics_policy<prometheus_metrics>);

}  // namespace seqinbox::metrics
