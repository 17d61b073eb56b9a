#pragma once
// An in-memory message source: a queue of deliveries with Kafka-like acknowledgement. A polled
// delivery stays in flight until acknowledged; redeliver_unacknowledged() puts every delivery in
// flight back at the front of the queue, as a consumer restart does. Thread-safe.
#include <algorithm>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/source/concept.hpp"

namespace seqinbox::memory {

class source {
public:
    /// Appends a delivery; an offset of -1 gets the next offset of this source.
    void push(envelope record) {
        std::lock_guard lock(mutex_);
        if (record.offset < 0) record.offset = next_offset_++;
        queue_.push_back(std::move(record));
    }

    std::optional<envelope> poll() {
        std::lock_guard lock(mutex_);
        if (queue_.empty()) return std::nullopt;
        envelope record = std::move(queue_.front());
        queue_.pop_front();
        in_flight_.push_back(record);
        return record;
    }

    void acknowledge(const envelope& record) {
        std::lock_guard lock(mutex_);
        auto it = std::ranges::find_if(in_flight_, [&](const envelope& e) { return same_delivery(e, record); });
        if (it == in_flight_.end()) return;
        acknowledged_.push_back(std::move(*it));
        in_flight_.erase(it);
    }

    /// Puts every polled but unacknowledged delivery back in front, in its original order.
    std::size_t redeliver_unacknowledged() {
        std::lock_guard lock(mutex_);
        std::size_t count = in_flight_.size();
        queue_.insert(queue_.begin(), in_flight_.begin(), in_flight_.end());
        in_flight_.clear();
        return count;
    }

    std::size_t pending() const {
        std::lock_guard lock(mutex_);
        return queue_.size();
    }
    std::size_t in_flight() const {
        std::lock_guard lock(mutex_);
        return in_flight_.size();
    }
    std::vector<envelope> acknowledged() const {
        std::lock_guard lock(mutex_);
        return acknowledged_;
    }

private:
    static bool same_delivery(const envelope& a, const envelope& b) {
        return a.offset == b.offset && a.partition == b.partition && a.topic == b.topic && a.cluster == b.cluster;
    }

    mutable std::mutex mutex_;
    std::deque<envelope> queue_;
    std::vector<envelope> in_flight_;
    std::vector<envelope> acknowledged_;
    std::int64_t next_offset_ = 0;
};

static_assert(source_policy<source>);

}  // namespace seqinbox::memory
