#pragma once
#include <atomic>
#include <chrono>
#include <memory>

#include "seqinbox/clock/concept.hpp"

namespace seqinbox::clock {

/// A clock that moves only when told to. Copies share the same time, so a test can hand one
/// copy to the inbox and advance another. Thread-safe.
class manual_clock {
public:
    explicit manual_clock(timestamp start = timestamp{} + std::chrono::hours(24 * 365 * 50))
        : now_(std::make_shared<std::atomic<timestamp::rep>>(start.time_since_epoch().count())) {}

    timestamp now() const { return timestamp(timestamp::duration(now_->load())); }
    void advance(timestamp::duration d) { now_->fetch_add(d.count()); }
    void set(timestamp t) { now_->store(t.time_since_epoch().count()); }

private:
    std::shared_ptr<std::atomic<timestamp::rep>> now_;
};

}  // namespace seqinbox::clock
