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

/// Where a job's scan stands within one run (keyset continuation): the sort key and id of the
/// last row a batch returned. Each batch reads only rows after it, so its cost does not grow with
/// the rows done before. Default: from the start.
struct scan_position {
    timestamp key{};
    instance_id id = 0;
    friend bool operator==(const scan_position&, const scan_position&) = default;
};

template <class S>
concept housekeeping_store =
    store_policy<S> && requires(S& s, const std::string& job, timestamp now, std::chrono::seconds delay, std::size_t limit,
                         scan_position& after, std::span<const instance_id> ids, const forward_waiting& forward,
                         std::span<const deduplication_window> windows) {
        /// Exclusive across every user of the database (PostgreSQL: a session advisory lock),
        /// held while the returned object lives; it converts to false when another holds it.
        typename S::job_lock;
        requires std::movable<typename S::job_lock>;
        { s.try_lock_job(job) } -> std::same_as<typename S::job_lock>;
        { static_cast<bool>(s.try_lock_job(job)) };
        /// Up to `limit` CLOSED instances with an id after `after.id` whose deduplication window
        /// has passed at `now`, by id: closed at least the window ago, the window of their
        /// sequence in `windows` or, for a sequence not listed, the instance's own retention
        /// (retain_until - created_at). Sets `after.id` to the last id returned.
        { s.closed_instances(now, windows, limit, after) } -> std::same_as<std::vector<instance_id>>;
        /// Marks up to `limit` OPEN instances past retain_until (and not yet marked), sorting
        /// after `after` by (retain_until, id), for removal at retain_until + delay; returns them
        /// as marked, in that order, and sets `after` to the last. Instances a writer holds are
        /// passed over (the next run marks them).
        { s.mark_expired(now, delay, limit, after) } -> std::same_as<std::vector<sequence_instance>>;
        /// Up to `limit` OPEN instances whose remove_after is at or before `now`, sorting after
        /// `after` by (remove_after, id), in that order; sets `after` to the last (closing ends an
        /// expiry: a CLOSED instance waits for its deduplication window).
        { s.removable_instances(now, limit, after) } -> std::same_as<std::vector<instance_id>>;
        /// In one transaction that keeps every other writer away from the instances (PostgreSQL:
        /// SELECT ... FOR UPDATE, in id order): calls `forward` with the WAITING messages of each
        /// instance of `ids` that still exists, then deletes them with their messages and claims.
        /// A `forward` that throws keeps them all. Returns how many were deleted.
        { s.remove_instances(ids, forward) } -> std::same_as<std::size_t>;
    };

}  // namespace seqinbox
