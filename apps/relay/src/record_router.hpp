#pragma once
// The relay's records on their way from its one Kafka poller to its consumer threads: each
// record is queued for the thread of its context (a hash of the context id), so that a
// context's records are decided by one thread whatever partitions its producers put them on.
// Batches of different threads then hold different instances and never wait for each other's
// instance locks, which they did on scattered input when each thread decided its own
// partitions (a batch waited for most of the batches in flight: see README, Performance).
// The poller takes more while a thread has less than a batch queued, up to `max_bytes` of records
// queued in all: the consumer hands out a partition's fetched records in a run (thousands of
// small ones), so a thread's queue may have to hold a run before the next partition's records
// reach the others. Thread-safe.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "seqinbox/envelope.hpp"

namespace seqinbox::relay::detail {

class record_router {
public:
    /// `batch`: the records a thread decides at once.
    record_router(std::size_t threads, std::size_t batch, std::size_t max_bytes) : queues_(threads), batch_(batch), max_bytes_(max_bytes) {}

    std::size_t threads() const noexcept { return queues_.size(); }

    /// Waits until a thread has less than a batch queued and less than max_bytes are queued in
    /// all, or `timeout` passed, or stop(); whether more records are wanted.
    bool wait_for_room(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        room_.wait_for(lock, timeout, [&] { return stopped_ || wanted(); });
        return !stopped_ && wanted();
    }

    /// Queues `by_thread[n]` for thread n, after the records queued before.
    void push(std::vector<std::vector<envelope>> by_thread) {
        {
            const std::lock_guard lock(mutex_);
            for (std::size_t n = 0; n < by_thread.size(); ++n)
                for (auto& record : by_thread[n]) {
                    bytes_ += size_of(record);
                    queues_.at(n).push_back(std::move(record));
                }
        }
        arrived_.notify_all();
    }

    /// Up to `max` records of thread `thread`, in queue order: waits up to `first_wait` for the
    /// first, then up to `linger` for more while fewer than `max` are queued. Empty after stop().
    std::vector<envelope> take(std::size_t thread, std::size_t max, std::chrono::milliseconds first_wait, std::chrono::milliseconds linger) {
        std::unique_lock lock(mutex_);
        auto& queue = queues_.at(thread);
        if (!arrived_.wait_for(lock, first_wait, [&] { return stopped_ || !queue.empty(); }) || stopped_) return {};
        arrived_.wait_for(lock, linger, [&] { return stopped_ || queue.size() >= max; });
        std::vector<envelope> records;
        while (!queue.empty() && records.size() < max) {
            bytes_ -= size_of(queue.front());
            records.push_back(std::move(queue.front()));
            queue.pop_front();
        }
        room_.notify_all();
        return records;
    }

    /// Wakes every waiting thread; later waits return at once.
    void stop() {
        {
            const std::lock_guard lock(mutex_);
            stopped_ = true;
        }
        arrived_.notify_all();
        room_.notify_all();
    }

    /// Every record still queued (after stop(): never decided, so given back to the source).
    std::vector<envelope> take_all() {
        const std::lock_guard lock(mutex_);
        std::vector<envelope> records;
        for (auto& queue : queues_) {
            for (auto& record : queue) records.push_back(std::move(record));
            queue.clear();
        }
        bytes_ = 0;
        return records;
    }

private:
    bool wanted() const {
        return bytes_ < max_bytes_ && std::ranges::any_of(queues_, [&](const auto& queue) { return queue.size() < batch_; });
    }

    /// What a queued record weighs: its key, value and headers, and the envelope itself.
    static std::size_t size_of(const envelope& record) {
        std::size_t bytes = sizeof(envelope) + (record.key ? record.key->size() : 0) + (record.value ? record.value->size() : 0);
        for (const auto& [name, value] : record.headers) bytes += name.size() + value.size();
        return bytes;
    }

    std::mutex mutex_;
    std::condition_variable arrived_, room_;
    std::vector<std::deque<envelope>> queues_;
    std::size_t batch_, max_bytes_;
    std::size_t bytes_ = 0;
    bool stopped_ = false;
};

}  // namespace seqinbox::relay::detail
