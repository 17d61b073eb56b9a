#pragma once
// An in-memory error sink that keeps every failed delivery. Thread-safe. `fail_next(n)` makes the
// next n publications throw, to test that a failing sink loses nothing.
#include <cstddef>
#include <mutex>
#include <vector>

#include "seqinbox/error_sink/concept.hpp"

namespace seqinbox::memory {

class error_sink {
public:
    error_sink();
    ~error_sink();

    void publish(const failed_delivery& failure);
    std::vector<failed_delivery> records() const;
    std::size_t size() const;
    void fail_next(int count);

private:
    mutable std::mutex mutex_;
    std::vector<failed_delivery> records_;
    int failures_to_inject_ = 0;
};

static_assert(seqinbox::error_sink_policy<error_sink>);

}  // namespace seqinbox::memory
