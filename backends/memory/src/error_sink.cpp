// The in-memory error sink (memory/error_sink.hpp).
#include "seqinbox/memory/error_sink.hpp"

#include <stdexcept>

namespace seqinbox::memory {

error_sink::error_sink() = default;
error_sink::~error_sink() = default;

void error_sink::publish(const failed_delivery& failure) {
    std::lock_guard lock(mutex_);
    if (failures_to_inject_ > 0) {
        --failures_to_inject_;
        throw std::runtime_error("error sink unavailable (injected)");
    }
    records_.push_back(failure);
}

std::vector<failed_delivery> error_sink::records() const {
    std::lock_guard lock(mutex_);
    return records_;
}

std::size_t error_sink::size() const {
    std::lock_guard lock(mutex_);
    return records_.size();
}

void error_sink::fail_next(int count) {
    std::lock_guard lock(mutex_);
    failures_to_inject_ = count;
}

}  // namespace seqinbox::memory
