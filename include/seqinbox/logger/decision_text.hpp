#pragma once
// The one home of a decision's log line: its level and its text, escaped.
#include <string>

#include "seqinbox/decision.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/logger/concept.hpp"

namespace seqinbox::logger {

/// Decisions that lose or set aside a message, or that an operator forced, are warnings.
constexpr log_level level_of(const decision& e) noexcept {
    switch (e.kind) {
    case decision_kind::failed:
    case decision_kind::release_failed:
    case decision_kind::rejected:
    case decision_kind::expired:
    case decision_kind::overflowed:
    case decision_kind::gap_timed_out: return log_level::warn;
    default: return log_level::info;
    }
}

/// The line a text logger writes for `e` ("processed OrderCreated/c1 context o1", ...).
inline std::string text_of(const decision& e) {
    const std::string what = detail::loggable_message(e.qualified_type, e.idempotence_id, e.context_id);
    switch (e.kind) {
    case decision_kind::processed: return "processed " + what;
    case decision_kind::buffered: return "buffered " + what;
    case decision_kind::released: return "released " + what;
    case decision_kind::duplicate: return "skipped duplicate " + what + " (" + detail::loggable(e.reason) + ")";
    case decision_kind::failed: return "failed " + what + ": " + detail::loggable(e.reason);
    case decision_kind::release_failed: return "release failed " + what + ": " + detail::loggable(e.reason);
    case decision_kind::rejected: return "rejected " + what + ": " + detail::loggable(e.reason);
    case decision_kind::not_sequenced: return "not sequenced " + what + " -> " + std::string(to_string(e.result));
    case decision_kind::expired: return "expired " + what + " by an operator: not replayed";
    case decision_kind::closed: return "closed instance " + std::to_string(e.instance) + " context " + detail::loggable(e.context_id);
    case decision_kind::overflowed:
        return "buffer full: " + what + " must wait in instance " + std::to_string(e.instance) + " of " + detail::loggable(e.sequence) +
               ", " + detail::loggable(e.reason) + "; " + std::string(to_string(e.overflow));
    case decision_kind::gap_timed_out:
        return "gap timed out: " + detail::loggable(e.reason) + " in instance " + std::to_string(e.instance) + " of " +
               detail::loggable(e.sequence) + " context " + detail::loggable(e.context_id) + "; " + std::string(to_string(e.gap));
    }
    return what;
}

/// Hands `e` to `l`: as the event to a decision_logger, else as its line when its level is enabled.
template <logger_policy L>
void report(L& l, const decision& e) {
    if constexpr (decision_logger<L>)
        l.decided(e);
    else if (const log_level level = level_of(e); l.enabled(level))
        l.log(level, text_of(e));
}

}  // namespace seqinbox::logger
