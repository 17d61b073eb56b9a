#pragma once
// basic_inbox's bounded buffers (README, "Bounded buffers"): a message that must wait in an
// instance already holding its sequence's maxWaiting WAITING messages is not buffered; the
// sequence's overflow policy applies, under the instance lock the claim holds.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// Step 6 before buffering: when the instance's buffer is full, the policy decides; returns
/// false when the delivery may be buffered. Throws error(retryable) under `reject`.
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::overflowed(scope& s, locked_instance& locked, const delivery& d,
                                                                 delivery_result& result) {
    const buffer_limit& bound = d.type->sequence->buffer;
    const std::size_t limit = bound.limit();
    if (locked.waiting_count(s.t1, limit) < limit) return false;
    const std::string reason = overflow_reason(locked, d, limit);
    decision event = about(d, decision_kind::overflowed, reason);
    event.instance = locked.row.id;
    event.sequence = d.type->sequence->name;
    event.overflow = bound.on_overflow;
    decided(event);
    if (bound.on_overflow == overflow_policy::reject)
        throw error(error_category::retryable, "cannot buffer " + describe(d) + ": " + reason + "; the delivery is retried later",
                    std::string(buffer_full_sqlstate));
    if (bound.on_overflow == overflow_policy::dead_letter_instance)
        dead_letter_waiting(s, locked, d.context_id, reason, failure_kind::buffer_overflow);
    fail(s, locked.row.id, d, {reason, failure_kind::buffer_overflow});
    result.outcome = outcome::failed;
    return true;
}

template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::overflow_reason(const locked_instance& locked, const delivery& d,
                                                                             std::size_t limit) {
    const auto& seq = *d.type->sequence;
    std::string text = "the buffer of instance " + std::to_string(locked.row.id) + " of sequence " + detail::printable(seq.name) +
                       " is full: " + std::to_string(limit) + " or more messages WAITING (maxWaiting " + std::to_string(limit);
    if (!seq.buffer.max_waiting) text += ", the default: declare maxWaiting to choose";
    return text + ", overflow policy " + std::string(to_string(seq.buffer.on_overflow)) + ")";
}

/// dead-letter-instance (and a gap timeout's dead-letter): every WAITING message of the locked instance (stored, or buffered by
/// this batch) goes to the error sink first, then becomes FAILED with its claim deleted (a
/// resend retries), in one transaction: as a failed replay, nothing is lost. Reads the
/// instance's WAITING rows at once: at most maxWaiting records (and a batch's own) in memory.
/// Returns the highest number among them (numbered sequences).
template <class Store, class Source, class ErrorSink, class Policies>
std::optional<std::int64_t> basic_inbox<Store, Source, ErrorSink, Policies>::dead_letter_waiting(scope& s, locked_instance& locked, const std::string& context_id,
                                                                          const std::string& reason, failure_kind kind) {
    transaction& t1 = s.t1;
    std::vector<message_record> rows;
    detail::twin_rows twins;
    if (!locked.waiting.empty())
        for (auto& row : locked.waiting_rows(t1, locked.waiting))
            if (twins.admit(row)) rows.push_back(std::move(row));
    for (const auto& u : locked.unstored)
        if (!u.settled) rows.push_back(u.row);
    for (const auto& row : rows)
        sink_->publish({row.payload.value_or(envelope{}), reason, row.type, row.idempotence_id, context_id, kind});
    fail_buffered(s, rows, [&](const message_record& row) { return twins.of(row.key()); });
    std::optional<std::int64_t> highest;
    for (const auto& row : rows) {
        locked.settle(row);
        decided(about(decision_kind::failed, row.type, row.idempotence_id, context_id, reason));
        if (row.number) highest = std::max(highest.value_or(*row.number), *row.number);
    }
    locked.waiting.clear();
    return highest;
}

}  // namespace seqinbox
