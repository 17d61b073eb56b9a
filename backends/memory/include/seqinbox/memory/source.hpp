#pragma once
// An in-memory message source: a queue of deliveries with Kafka-like acknowledgement. A polled
// delivery stays in flight until acknowledged; redeliver_unacknowledged() puts every delivery in
// flight back at the front of the queue, as a consumer restart does. Thread-safe.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/source/concept.hpp"

namespace seqinbox::memory {

class source {
public:
    source();
    ~source();

    /// Appends a delivery; an offset of -1 gets the next offset of this source.
    void push(envelope record);
    std::optional<envelope> poll();
    /// Up to `max` queued deliveries, never waiting: the queue holds all there is.
    std::vector<envelope> poll_batch(std::size_t max);
    void acknowledge(const envelope& record);
    /// Puts every polled but unacknowledged delivery back in front, in its original order.
    std::size_t redeliver_unacknowledged();

    std::size_t pending() const;
    std::size_t in_flight() const;
    std::vector<envelope> acknowledged() const;

private:
    static bool same_delivery(const envelope& a, const envelope& b);

    mutable std::mutex mutex_;
    std::deque<envelope> queue_;
    std::vector<envelope> in_flight_;
    std::vector<envelope> acknowledged_;
    std::int64_t next_offset_ = 0;
};

static_assert(batch_source<source>);

}  // namespace seqinbox::memory
