// The in-memory message source (memory/source.hpp).
#include "seqinbox/memory/source.hpp"

#include <algorithm>
#include <utility>

namespace seqinbox::memory {

source::source() = default;
source::~source() = default;

void source::push(envelope record) {
    std::lock_guard lock(mutex_);
    if (record.offset < 0) record.offset = next_offset_++;
    queue_.push_back(std::move(record));
}

std::optional<envelope> source::poll() {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    envelope record = std::move(queue_.front());
    queue_.pop_front();
    in_flight_.push_back(record);
    return record;
}

std::vector<envelope> source::poll_batch(std::size_t max) {
    std::lock_guard lock(mutex_);
    std::vector<envelope> batch;
    while (batch.size() < max && !queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        in_flight_.push_back(batch.back());
    }
    return batch;
}

void source::acknowledge(const envelope& record) {
    std::lock_guard lock(mutex_);
    auto it = std::ranges::find_if(in_flight_, [&](const envelope& e) { return same_delivery(e, record); });
    if (it == in_flight_.end()) return;
    acknowledged_.push_back(std::move(*it));
    in_flight_.erase(it);
}

std::size_t source::redeliver_unacknowledged() {
    std::lock_guard lock(mutex_);
    std::size_t count = in_flight_.size();
    queue_.insert(queue_.begin(), in_flight_.begin(), in_flight_.end());
    in_flight_.clear();
    return count;
}

std::size_t source::pending() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

std::size_t source::in_flight() const {
    std::lock_guard lock(mutex_);
    return in_flight_.size();
}

std::vector<envelope> source::acknowledged() const {
    std::lock_guard lock(mutex_);
    return acknowledged_;
}

bool source::same_delivery(const envelope& a, const envelope& b) {
    return a.offset == b.offset && a.partition == b.partition && a.topic == b.topic && a.cluster == b.cluster;
}

}  // namespace seqinbox::memory
