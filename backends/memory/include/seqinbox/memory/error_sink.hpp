#pragma once
// An in-memory error sink that keeps every failed delivery. Thread-safe. `fail_next(n)` makes the
// next n publications throw, to test that a failing sink loses nothing.
#include <mutex>
#include <stdexcept>
#include <vector>

#include "seqinbox/error_sink/concept.hpp"

namespace seqinbox::memory {

class error_sink {
public:
    void publish(const failed_delivery& failure) {
        std::lock_guard lock(mutex_);
        if (failures_to_inject_ > 0) {
            --failures_to_inject_;
            throw std::runtime_error("error sink unavailable (injected)");
        }
        records_.push_back(failure);
    }

    std::vector<failed_delivery> records() const {
        std::lock_guard lock(mutex_);
        return records_;
    }
    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return records_.size();
    }
    void fail_next(int count) {
        std::lock_guard lock(mutex_);
        failures_to_inject_ = count;
    }

private:
    mutable std::mutex mutex_;
    std::vector<failed_delivery> records_;
    int failures_to_inject_ = 0;
};

static_assert(seqinbox::error_sink_policy<error_sink>);

}  // namespace seqinbox::memory
