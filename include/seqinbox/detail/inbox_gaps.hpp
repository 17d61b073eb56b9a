#pragma once
// basic_inbox's gap timeouts (run_gap_timeouts, README "Numbered sequences"): a numbered context
// whose first WAITING message after a missing number has waited longer than its sequence's gap
// timeout gets the sequence's gap policy, under the instance lock, in a transaction of its own.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::run_gap_timeouts(std::size_t page_size, std::size_t pages)
    requires housekeeping_store<Store>
{
    ensure_ready();
    std::size_t timed_out = 0;
    for (const auto& seq : catalog_.declared().sequences) {
        if (!seq.numbered() || !seq.numbering.gap_timeout) continue;
        const timestamp now = clock_.now();
        scan_position after = gap_scan_start(seq.name);
        bool reached_end = false;
        for (std::size_t page = 0; page < pages && !reached_end; ++page) {
            const auto ids = store_->stalled_numbered(seq.name, now - *seq.numbering.gap_timeout, page_size, after);
            for (instance_id id : ids) timed_out += resolve_gap(id, seq, now) ? 1 : 0;
            reached_end = ids.size() < page_size;
        }
        gap_scan_stop(seq.name, reached_end ? scan_position{} : after);
    }
    return timed_out;
}

/// Where this inbox's last run stopped in a sequence's stalled instances: held gaps stay stalled,
/// so a run that started from the first each time would never reach those past its pages.
template <class Store, class Source, class ErrorSink, class Policies>
scan_position basic_inbox<Store, Source, ErrorSink, Policies>::gap_scan_start(const std::string& sequence) {
    std::lock_guard lock(gap_scans_mutex_);
    return gap_scans_[sequence];
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::gap_scan_stop(const std::string& sequence, scan_position at) {
    std::lock_guard lock(gap_scans_mutex_);
    gap_scans_[sequence] = at;
}

/// Under the lock, the instance is looked at again: the gap may have been filled (or skipped by
/// an operator, or its release pass died with a connection: a release pass runs), or the first
/// message after it may be younger than the store's find (another gap, not timed out yet).
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::resolve_gap(instance_id id, const sequence_declaration<message_type>& seq,
                                                                  timestamp now) {
    transaction t1 = store_->begin();
    locked_instance locked;
    try {
        locked = lock(t1, id);
    } catch (const error& e) {
        if (e.category() != error_category::retryable) throw;
        return false;  // removed meanwhile
    }
    scope s{t1};
    const auto expected = detail::expected_number(t1, locked, seq.numbering);
    // From the expected number: a row below it (an operator's CONSUME released a later one) is no gap.
    const auto first = t1.waiting_numbered(id, expected.value_or(std::numeric_limits<std::int64_t>::min()), 1);
    bool timed_out = false;
    if (!first.empty() && expected && *first.front().number == *expected) {
        delivery_result result{outcome::processed, {}, {}, locked.row.context_id, 0, 0};
        release_numbered(s, locked, seq.numbering, locked.row.context_id, result);
    } else if (!first.empty() && first.front().created_at + *seq.numbering.gap_timeout <= now) {
        apply_gap_policy(s, locked, seq, *first.front().number);
        timed_out = true;
    }
    t1.commit();
    return timed_out;
}

/// The gap before `first_waiting` timed out: hold reports it, skip gives its numbers up and
/// releases what follows, dead-letter sends every WAITING message to the error sink (FAILED, its
/// claim deleted) and gives their numbers up: the context expects the number after the highest.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::apply_gap_policy(scope& s, locked_instance& locked,
                                                                       const sequence_declaration<message_type>& seq,
                                                                       std::int64_t first_waiting) {
    const auto expected = detail::expected_number(s.t1, locked, seq.numbering);
    const std::string missing = expected && *expected < first_waiting - 1
                                    ? "numbers " + std::to_string(*expected) + " to " + std::to_string(first_waiting - 1) + " missing"
                                    : "number " + std::to_string(first_waiting - 1) + " missing";
    const std::string reason = missing + " for longer than the gap timeout of " + std::to_string(seq.numbering.gap_timeout->count()) +
                               " s (gap policy " + std::string(to_string(seq.numbering.on_gap)) + ")";
    decision event = about(decision_kind::gap_timed_out, {}, {}, locked.row.context_id, reason);
    event.instance = locked.row.id;
    event.sequence = seq.name;
    event.gap = seq.numbering.on_gap;
    decided(event);
    if (seq.numbering.on_gap == gap_policy::skip) {
        s.t1.skip_numbers(locked.row.id, first_waiting - 1);
        locked.last_number = first_waiting - 1;
        delivery_result result{outcome::processed, {}, {}, locked.row.context_id, 0, 0};
        release_numbered(s, locked, seq.numbering, locked.row.context_id, result);
    } else if (seq.numbering.on_gap == gap_policy::dead_letter) {
        const auto highest = dead_letter_waiting(s, locked, locked.row.context_id, reason, failure_kind::gap_timeout);
        s.t1.skip_numbers(locked.row.id, highest.value_or(first_waiting));
    }
}

}  // namespace seqinbox
