#pragma once
// What the housekeeping jobs (seqinbox/housekeeper.hpp) need of a store: exclusion between
// service instances, finding work in batches, and removing an instance atomically after its
// WAITING messages were handed over. A store that supports them models `housekeeping_store`.
#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// Called with the WAITING messages (with payloads) of an instance about to be removed; throwing
/// keeps the instance.
using forward_waiting = std::function<void(const sequence_instance&, std::span<const message_record>)>;

/// How long the CLOSED instances of one sequence are kept after closing: late duplicates of their
/// messages are recognised until then (the sequence's deduplication window).
struct deduplication_window {
    std::string sequence;
    std::chrono::seconds window{0};
};

template <class S>
concept housekeeping_store =
    store_policy<S> && requires(S& s, const std::string& job, timestamp now, std::chrono::seconds delay, std::size_t limit,
                         instance_id id, const forward_waiting& forward, std::span<const deduplication_window> windows) {
        /// Exclusive across every user of the database (PostgreSQL: a session advisory lock),
        /// held while the returned object lives; it converts to false when another holds it.
        typename S::job_lock;
        requires std::movable<typename S::job_lock>;
        { s.try_lock_job(job) } -> std::same_as<typename S::job_lock>;
        { static_cast<bool>(s.try_lock_job(job)) };
        /// Up to `limit` CLOSED instances whose deduplication window has passed at `now`, oldest
        /// first: closed at least the window ago, the window of their sequence in `windows` or,
        /// for a sequence not listed, the instance's own retention (retain_until - created_at).
        { s.closed_instances(now, windows, limit) } -> std::same_as<std::vector<instance_id>>;
        /// Marks up to `limit` OPEN instances past retain_until (and not yet marked) for removal
        /// at retain_until + delay; returns them as marked.
        { s.mark_expired(now, delay, limit) } -> std::same_as<std::vector<sequence_instance>>;
        /// Up to `limit` OPEN instances whose remove_after is at or before `now`, oldest first
        /// (closing ends an expiry: a CLOSED instance waits for its deduplication window).
        { s.removable_instances(now, limit) } -> std::same_as<std::vector<instance_id>>;
        /// In one transaction that keeps every other writer away from the instance (PostgreSQL:
        /// SELECT ... FOR UPDATE): calls `forward` with its WAITING messages, then deletes it
        /// with its messages and claims. False when it no longer exists.
        { s.remove_instance(id, forward) } -> std::same_as<bool>;
    };

}  // namespace seqinbox
