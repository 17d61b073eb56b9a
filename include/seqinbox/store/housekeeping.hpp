#pragma once
// What the housekeeping jobs (seqinbox/housekeeper.hpp) need of a store: exclusion between
// service instances, finding work in batches, and removing an instance atomically after its
// WAITING messages were handed over. A store that supports them models `housekeeping_store`.
#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// The bound of one call of `forward_waiting`: at most forward_page_rows messages whose keys,
/// values and headers total at most forward_page_bytes, but for a page of one larger record.
/// A removal batch holds one page at a time, so its memory does not grow with the data.
inline constexpr std::size_t forward_page_rows = 1000;
inline constexpr std::size_t forward_page_bytes = std::size_t{4} << 20;

/// Called with the WAITING messages (with payloads) of an instance about to be removed, in
/// consecutive pages (bounded as above) in id order, once or more per instance that has any;
/// throwing keeps every instance of the batch.
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

/// The deduplication window of a CLOSED instance: its sequence's in `windows` (the first listed)
/// or, for a sequence not listed, the retention it was created with.
inline timestamp::duration deduplication_window_of(const sequence_instance& instance, std::span<const deduplication_window> windows) {
    for (const auto& w : windows)
        if (w.sequence == instance.sequence) return w.window;
    return instance.retain_until - instance.created_at;
}

/// When the deduplication window of a CLOSED instance ends: from its closing (`closed_at`) or,
/// for a row closed without that time (not written by seqinbox), from its creation.
inline timestamp closed_window_end(const sequence_instance& instance, std::optional<timestamp> closed_at,
                                   std::span<const deduplication_window> windows) {
    return closed_at.value_or(instance.created_at) + deduplication_window_of(instance, windows);
}

/// What remove_instances checks again once it holds an instance's lock: the condition its job
/// found the instance by. Between finding and locking a writer may have changed the instance
/// (closed it, so that its deduplication window now applies); one for which the condition no
/// longer holds is kept. `windows` is viewed, not copied: it must outlive the call.
struct removal_condition {
    instance_state state = instance_state::open;  ///< open: removal after remove_after; closed: closed cleanup
    timestamp now{};
    std::span<const deduplication_window> windows{};  ///< closed cleanup: as closed_instances takes them

    /// Removal: OPEN, and remove_after at or before `now`.
    static removal_condition expired(timestamp now) { return {instance_state::open, now, {}}; }
    /// Closed cleanup: CLOSED, and its deduplication window passed at `now`.
    static removal_condition window_passed(timestamp now, std::span<const deduplication_window> windows) {
        return {instance_state::closed, now, windows};
    }

    /// Whether it holds for `instance` as it is now, closed at `closed_at` when CLOSED.
    bool holds(const sequence_instance& instance, std::optional<timestamp> closed_at) const {
        if (instance.state != state) return false;
        if (state == instance_state::open) return instance.remove_after && *instance.remove_after <= now;
        return closed_window_end(instance, closed_at, windows) <= now;
    }
};

template <class S>
concept housekeeping_store =
    store_policy<S> && requires(S& s, const std::string& job, timestamp now, std::chrono::seconds delay, std::size_t limit,
                         scan_position& after, std::span<const instance_id> ids, const forward_waiting& forward,
                         const removal_condition& condition,
                         std::span<const deduplication_window> windows) {
        /// Exclusive across every user of the database (PostgreSQL: a lease row that expires unless
        /// renewed), held while the returned object lives; it converts to false when another holds
        /// it. renew() extends it, false when it was lost meanwhile (the job must stop).
        typename S::job_lock;
        requires std::movable<typename S::job_lock>;
        { s.try_lock_job(job) } -> std::same_as<typename S::job_lock>;
        { static_cast<bool>(s.try_lock_job(job)) };
        { s.try_lock_job(job).renew() } -> std::convertible_to<bool>;
        /// Up to `limit` CLOSED instances whose deduplication window has passed at `now`, by the
        /// end of their window (closed_window_end given `windows`) then id, sorting after `after`;
        /// sets `after` to the last returned. The cost of a batch does not grow with the instances
        /// still inside their window (PostgreSQL: it stops at the first of each sequence).
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
        /// SELECT ... FOR UPDATE SKIP LOCKED, in id order): of the instances of `ids` that still
        /// exist, that no writer holds (those are passed over without waiting: the next run finds
        /// them again) and for which `condition` still holds once locked, calls `forward` with
        /// their WAITING messages page by page (one page in memory at a time), then deletes them
        /// with their messages and claims. A `forward` that throws keeps them all. Returns how many
        /// were deleted.
        { s.remove_instances(ids, condition, forward) } -> std::same_as<std::size_t>;
        /// Gap timeouts of numbered sequences: up to `limit` OPEN instances of the sequence `job`
        /// names (here: a sequence name) holding a WAITING message that has a number and was
        /// stored at or before `now`, by id after `after.id`; sets `after.id` to the last. Its
        /// cost does not grow with the instances scanned before (keyset) nor with their messages.
        { s.stalled_numbered(job, now, limit, after) } -> std::same_as<std::vector<instance_id>>;
    };

}  // namespace seqinbox
