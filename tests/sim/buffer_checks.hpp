#pragma once
// Bounded buffers (issue 38) in the simulator: what the consumers see of overflows (a metrics
// sink that takes the engine's `overflowed` decisions), and the checks on the store: no
// instance holds more WAITING rows than its sequence's maxWaiting (but for rows a state step
// stored after its claim transaction died, see buffer_bound_check), and a message the overflow
// dead-lettered is FAILED without a claim at quiescence, so that a resend retries it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "listener_probe.hpp"
#include "run_types.hpp"
#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/decision.hpp"
#include "seqinbox/failure_kind.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"
#include "seqinbox/metrics/null_metrics.hpp"
#include "seqinbox/store/model.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

/// One consumer's overflows, written by its task (the step hand-over orders the accesses).
struct overflow_log {
    std::array<std::size_t, 3> by_policy{};  ///< by seqinbox::overflow_policy
    bool rejecting = false;                  ///< the task's attempt is being rejected (the consumer takes it)
    bool reject_unseen = false;              ///< a `reject` the controller has not taken yet
    std::array<std::size_t, 3> gaps{};       ///< gap timeouts, by seqinbox::gap_policy
    std::set<std::string> gap_skipped;       ///< contexts whose gap the task's gap job skipped
};

/// The consumers' metrics sink: nothing but the overflows (every decision comes here instead of
/// the null calls it implies; seqinbox/metrics/decision_counts.hpp).
struct overflow_metrics : metrics::null_metrics {
    overflow_metrics() = default;
    explicit overflow_metrics(overflow_log& into) : log(&into) {}

    overflow_log* log = nullptr;

    void decided(const decision& e) {
        if (e.kind == decision_kind::gap_timed_out && log != nullptr) return gap_timed_out(e);
        if (e.kind != decision_kind::overflowed || log == nullptr) return;
        ++log->by_policy[static_cast<std::size_t>(e.overflow)];
        if (e.overflow != overflow_policy::reject) return;
        log->rejecting = true;  // the engine throws error(retryable) next
        log->reject_unseen = true;
    }

    void gap_timed_out(const decision& e) {
        ++log->gaps[static_cast<std::size_t>(e.gap)];
        if (e.gap == gap_policy::skip) log->gap_skipped.emplace(e.context_id);
    }
};

/// Adds one consumer's overflows to the run's counts: buffer_overflows, and by policy.
inline void count_overflows(const overflow_log& log, tally& counts) {
    for (overflow_policy policy : {overflow_policy::dead_letter_newest, overflow_policy::dead_letter_instance, overflow_policy::reject}) {
        const std::size_t n = log.by_policy[static_cast<std::size_t>(policy)];
        std::string name = "buffer_overflows_" + std::string(to_string(policy));
        std::ranges::replace(name, '-', '_');
        counts["buffer_overflows"] += n;
        counts[name] += n;
    }
    for (gap_policy policy : {gap_policy::hold, gap_policy::skip, gap_policy::dead_letter}) {
        std::string name = "gap_timeouts_" + std::string(to_string(policy));
        std::ranges::replace(name, '-', '_');
        counts[name] += log.gaps[static_cast<std::size_t>(policy)];
    }
}

/// Consumer `c`'s batch part was rolled back for a full buffer after its listeners ran: they run
/// again on retry. Under `required` their writes rolled back (the at-least-once window, as for a
/// full lock table); under `not_supported` a listener repeats its effects in normal operation.
template <class IsDurable>
void batch_rejected(std::size_t c, bool required, listener_probe& probe, IsDurable is_durable, tally& counts, violation_log& log) {
    const std::size_t rerun = probe.rolled_back(c, is_durable);
    counts["at_least_once_windows"] += rerun;
    counts["buffer_reject_rolled_back_listeners"] += rerun;
    if (rerun > 0 && !required)
        log.add("listener_rerun_after_reject", "c" + std::to_string(c) + ": a batch part was rejected for a full buffer after " +
                                                   std::to_string(rerun) + " of its listeners ran outside a transaction: they run again");
}

/// The committed state a rejected delivery's retry depends on: while it is unchanged, a retry is
/// rejected again (a rejection commits nothing), so a consumer that backed off waits for a change.
using committed_state = std::vector<std::tuple<instance_id, message_id, std::string, std::string, message_state>>;

inline committed_state committed_state_of(const memory::store& store) {
    committed_state state;
    for (const auto& i : store.instances()) state.emplace_back(i.id, 0, i.context_id, std::string(to_string(i.state)), message_state::waiting);
    for (const auto& r : store.messages()) state.emplace_back(r.instance, r.id, r.type, r.idempotence_id, r.state);
    return state;
}

/// The delivery consumers a `reject` made back off, with the committed state each rejection saw.
class backoff_watch {
public:
    explicit backoff_watch(std::size_t consumers) : seen_(consumers), dirty_(consumers) {}

    /// After a step: whether the consumer's task was rejected in it; notes the state it saw.
    bool take_reject(std::size_t consumer, overflow_log& log, const memory::store& store) {
        if (!std::exchange(log.reject_unseen, false)) return false;
        seen_[consumer] = committed_state_of(store);
        dirty_[consumer] = true;
        return true;
    }

    /// The committed state may have changed in this step.
    void state_changed() { std::fill(dirty_.begin(), dirty_.end(), true); }

    /// Whether the state changed since the consumer's last rejection (a retry may then pass);
    /// compared once after each possible change.
    bool changed_since_reject(std::size_t consumer, const memory::store& store) {
        const bool dirty = dirty_[consumer];
        dirty_[consumer] = false;
        return dirty && seen_[consumer] != committed_state_of(store);
    }

private:
    std::vector<committed_state> seen_;
    std::vector<bool> dirty_;  // by consumer: a change it has not compared yet
};

/// At no observation point does an instance hold more than maxWaiting WAITING rows, but for rows
/// stored outside the instance lock. The engine counts under the lock before buffering, and
/// WAITING rows are inserted under it; except (store/concept.hpp, lock_instance) a state step
/// beside the claim transaction that commits after that transaction died: the next lock holder
/// counted without it. Each such row (`orphaned`, reported by process_store) may exceed the bound
/// by one while it stays WAITING; a row that leaves WAITING is no longer excused, should it be
/// buffered again under the lock.
class buffer_bound_check {
public:
    explicit buffer_bound_check(const buffer_limit& bound) : limit_(bound.limit()), checked_(bound.max_waiting.has_value()) {}

    /// Takes the keys of such rows; returns how many.
    std::size_t orphaned(const std::vector<claim_key>& keys) {
        orphans_.insert(keys.begin(), keys.end());
        return keys.size();
    }
    /// False under the default bound (10,000), which no seed's workload reaches.
    bool checked() const noexcept { return checked_; }

    /// `rows`: the store's committed messages. Returns how many instances are over maxWaiting
    /// only by such rows (excused).
    std::size_t run(const std::vector<message_record>& rows, violation_log& log) {
        std::map<instance_id, std::size_t> waiting, excused;
        std::set<claim_key> still_waiting;
        for (const auto& row : rows) {
            if (row.state != message_state::waiting) continue;
            ++waiting[row.instance];
            if (orphans_.contains(row.key())) ++excused[row.instance];
            still_waiting.insert(row.key());
        }
        std::erase_if(orphans_, [&](const claim_key& key) { return !still_waiting.contains(key); });
        std::size_t over_by_excused = 0;
        for (const auto& [instance, count] : waiting) {
            if (count <= limit_) continue;
            if (count <= limit_ + excused[instance]) {
                ++over_by_excused;
                continue;
            }
            if (reported_.insert(instance).second)
                log.add("buffer_over_limit", "instance " + std::to_string(instance) + " holds " + std::to_string(count) +
                                                 " WAITING messages, more than maxWaiting " + std::to_string(limit_) + " plus " +
                                                 std::to_string(excused[instance]) + " stored after their claim transaction died");
        }
        return over_by_excused;
    }

private:
    std::size_t limit_;
    bool checked_;
    std::set<claim_key> orphans_;
    std::set<instance_id> reported_;
};

/// At quiescence: a key the overflow sent to the error sink whose only row is FAILED has no
/// committed claim, or a resend would be skipped as a duplicate and the message never handled.
/// In a numbered seed, a key whose number another key holds (or was released) is excused: a
/// redelivery claimed it and was skipped as a duplicate of its number, as a resend would be. A
/// key an operator's CONSUME targeted is reported as claim_kept_after_cleared_action (README:
/// a second action runner claims the key, finds the action cleared by the first and commits).
inline void check_overflow_dead_letters(const memory::store& store, const memory::error_sink& sink, const listener_probe& probe,
                                        violation_log& log, const std::function<bool(const claim_key&)>& skipped_number = {}) {
    std::set<claim_key> reported;
    for (const auto& f : sink.records()) {
        if (f.kind != failure_kind::buffer_overflow) continue;
        const claim_key key{f.qualified_type, f.idempotence_id};
        const auto rows = store.messages_with_key(key);
        if (rows.size() != 1 || rows.front().state != message_state::failed || !memory::testing::has_claim(store, key)) continue;
        if (skipped_number && skipped_number(key)) continue;
        if (reported.insert(key).second)
            log.add(probe.consume_target(key) ? "claim_kept_after_cleared_action" : "overflow_kept_claim",
                    listener_probe::text(key) + " was dead-lettered for a full buffer and is FAILED with its claim");
    }
}

}  // namespace seqinbox::sim
