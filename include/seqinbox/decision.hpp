#pragma once
// The engine's decisions as structured events: loggers, metrics sinks and tools read the fields
// rather than re-parse log text, whose wording may change. The text of a log line is made from
// the event in one place (seqinbox/logger/decision_text.hpp).
#include <chrono>
#include <string_view>

#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/outcome.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

enum class decision_kind {
    processed,       ///< the listener ran on delivery: PROCESSED
    buffered,        ///< the release condition is not met yet: stored WAITING
    released,        ///< a WAITING message's listener ran: PROCESSED (`waited` says how long after it was stored)
    duplicate,       ///< skipped, nothing written; `reason` says why ("already claimed", "already handled")
    failed,          ///< the listener threw on delivery: FAILED and in the error sink; `reason` quotes it
    release_failed,  ///< a released listener threw: FAILED and in the error sink; `reason` quotes it
    rejected,        ///< a bad message, in the error sink: `rejection` names the kind, `reason` the details
    not_sequenced,   ///< handled directly, nothing stored: `result` is not_sequenced, or failed when the listener threw
    expired,         ///< an operator expired a WAITING message: PROCESSED without running its listener
    closed,          ///< every declared type of `instance` is processed: the instance is CLOSED
    overflowed,      ///< a message had to wait in `instance` of `sequence`, whose buffer was full: `overflow` applies
    gap_timed_out,   ///< numbers missing in `instance` of `sequence` (`reason` names them) past the gap timeout: `gap` applies
};

constexpr std::string_view to_string(decision_kind k) noexcept {
    switch (k) {
    case decision_kind::processed: return "processed";
    case decision_kind::buffered: return "buffered";
    case decision_kind::released: return "released";
    case decision_kind::duplicate: return "duplicate";
    case decision_kind::failed: return "failed";
    case decision_kind::release_failed: return "release_failed";
    case decision_kind::rejected: return "rejected";
    case decision_kind::not_sequenced: return "not_sequenced";
    case decision_kind::expired: return "expired";
    case decision_kind::closed: return "closed";
    case decision_kind::overflowed: return "overflowed";
    case decision_kind::gap_timed_out: return "gap_timed_out";
    }
    return "?";
}

/// One decision. The views are valid only during the call that receives the event: copy what
/// you keep. Text fields are as the record or the exception gave them, not escaped; a field that
/// does not apply is empty (a rejected or unsequenced message has no context id, a closed
/// instance no type or idempotence id).
struct decision {
    decision_kind kind = decision_kind::processed;
    std::string_view qualified_type;
    std::string_view idempotence_id;
    std::string_view context_id;
    std::string_view reason;                     ///< duplicate, failed, release_failed, rejected
    seqinbox::rejection rejection = rejection::none;  ///< rejected: why
    outcome result = outcome::not_sequenced;     ///< not_sequenced: the delivery's outcome
    instance_id instance = 0;                    ///< closed, overflowed, gap_timed_out: the instance
    std::string_view sequence;                   ///< overflowed, gap_timed_out: the instance's sequence
    overflow_policy overflow = overflow_policy::dead_letter_newest;  ///< overflowed: the policy applied
    gap_policy gap = gap_policy::hold;           ///< gap_timed_out: the policy applied
    std::chrono::nanoseconds waited{};           ///< released: since the message was stored WAITING
};

}  // namespace seqinbox
