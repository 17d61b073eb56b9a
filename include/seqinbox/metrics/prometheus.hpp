#pragma once
// A metrics sink feeding a Prometheus registry. The inbox holds its sink by value, so the sink
// is a cheap handle: every copy feeds the same shared registry, which several inboxes and an
// HTTP endpoint (serving registry::render()) can share. Thread-safe.
#include <chrono>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/metrics/concept.hpp"
#include "seqinbox/metrics/registry.hpp"

namespace seqinbox::metrics {

struct prometheus_options {
    std::vector<double> handle_buckets = default_duration_buckets();  ///< seconds to handle a delivery
    std::vector<double> release_wait_buckets = default_wait_buckets();  ///< seconds a message waited
};

/// Per message type (label `type`, the qualified type): seqinbox_consumed_messages_total,
/// seqinbox_buffered_messages_total, seqinbox_released_messages_total,
/// seqinbox_failed_messages_total, seqinbox_duplicate_deliveries_total (counters),
/// seqinbox_release_wait_seconds and seqinbox_handle_seconds (histograms).
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
                                        options.handle_buckets)) {}

    void consumed(std::string_view type) { consumed_->inc({type}); }
    void buffered(std::string_view type) { buffered_->inc({type}); }
    void released(std::string_view type, std::chrono::nanoseconds wait) {
        released_->inc({type});
        release_wait_->observe({type}, seconds(wait));
    }
    void failed(std::string_view type) { failed_->inc({type}); }
    void duplicate(std::string_view type) { duplicate_->inc({type}); }
    void handled(std::string_view type, std::chrono::nanoseconds took) { handle_->observe({type}, seconds(took)); }

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
};

static_assert(metrics_sink<prometheus_metrics>);

}  // namespace seqinbox::metrics
