#pragma once
// A consumer's source in the simulator: a queue of deliveries with Kafka-like acknowledgement, as
// memory::source, that also takes one delivery back (redeliver, as the Kafka source seeks back
// to it), so that the inbox's poll_batch gives a failed part and the rest back itself. Before the
// acknowledgements of a delivery or a batch part the consumer may crash ("ack"): the rest of its
// work is then lost, and its restart gets what was not acknowledged. Used by one task at a time
// (the step driver's hand-over orders the accesses), so it has no lock.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/memory/detail/task_hook.hpp"
#include "seqinbox/source/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::sim {

/// The claim key a record carries (the header decoder's headers).
inline claim_key key_of(const envelope& record) {
    return {std::string(record.find_header("message-type").value_or("")), std::string(record.find_header("idempotence-id").value_or(""))};
}

/// Thrown out of acknowledge when the controller crashed the consumer there.
struct consumer_crash {};

class sim_source {
public:
    /// Appends a delivery; an offset of -1 gets the next offset of this source.
    void push(envelope record) {
        if (record.offset < 0) record.offset = next_offset_++;
        queue_.push_back(std::move(record));
    }

    std::optional<envelope> poll() {
        if (queue_.empty()) return std::nullopt;
        in_flight_.push_back(queue_.front());
        queue_.pop_front();
        return in_flight_.back();
    }

    std::vector<envelope> poll_batch(std::size_t max) {
        std::vector<envelope> batch;
        while (batch.size() < max)
            if (auto record = poll()) batch.push_back(std::move(*record));
            else break;
        return batch;
    }

    /// A point where the consumer may crash first; an acknowledgement of a delivery that is not
    /// in flight (twice, or after it was given back) is a fault the controller reports.
    void acknowledge(const envelope& record) {
        const auto* task = memory::detail::current_task;
        if (task == nullptr || task->label != "ack") memory::yield_point("ack");  // once before a part's acknowledgements
        if (std::exchange(crash_before_ack, false)) throw consumer_crash{};
        const auto it = find_in_flight(record);
        if (it == in_flight_.end()) {
            faults.push_back("acknowledged " + describe(record) + ", which is not in flight");
            return;
        }
        in_flight_.erase(it);
        acknowledged.push_back(key_of(record));
    }

    /// Takes `record` back to the front of the queue (the inbox gives a batch back last first).
    void redeliver(const envelope& record) {
        const auto it = find_in_flight(record);
        if (it == in_flight_.end()) {
            faults.push_back("gave back " + describe(record) + ", which is not in flight");
            return;
        }
        queue_.push_front(std::move(*it));
        in_flight_.erase(it);
        ++given_back;
    }

    /// Puts every polled but unacknowledged delivery back in front, in its original order, as a
    /// consumer restart does.
    void redeliver_unacknowledged() {
        queue_.insert(queue_.begin(), in_flight_.begin(), in_flight_.end());
        in_flight_.clear();
    }

    std::size_t pending() const noexcept { return queue_.size(); }
    /// The keys of the deliveries not polled yet (what a consumer that backed off leaves).
    std::vector<claim_key> pending_keys() const {
        std::vector<claim_key> keys;
        for (const auto& record : queue_) keys.push_back(key_of(record));
        return keys;
    }
    std::size_t in_flight() const noexcept { return in_flight_.size(); }
    const envelope* next() const noexcept { return queue_.empty() ? nullptr : &queue_.front(); }

    bool crash_before_ack = false;        ///< armed by the controller while the task waits at "ack"
    std::vector<claim_key> acknowledged;  ///< keys acknowledged since the controller last took them
    std::vector<std::string> faults;      ///< misuse of the source, since the controller last took them
    std::size_t given_back = 0;           ///< deliveries taken back one by one (redeliver)

private:
    std::vector<envelope>::iterator find_in_flight(const envelope& record) {
        return std::ranges::find_if(in_flight_, [&](const envelope& e) { return e.offset == record.offset; });
    }

    static std::string describe(const envelope& record) {
        const claim_key key = key_of(record);
        return key.type + "/" + key.idempotence_id + " at offset " + std::to_string(record.offset);
    }

    std::deque<envelope> queue_;
    std::vector<envelope> in_flight_;
    std::int64_t next_offset_ = 0;
};

static_assert(batch_source<sim_source> && redelivering_source<sim_source>);

}  // namespace seqinbox::sim
