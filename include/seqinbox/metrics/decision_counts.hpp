#pragma once
// The one home of what a decision counts on a metrics sink.
#include "seqinbox/decision.hpp"
#include "seqinbox/metrics/concept.hpp"

namespace seqinbox::metrics {

/// Hands `e` to `m`: as the event when the sink takes decisions, else as the calls it implies.
/// A listener's completion (consumed) and a delivery's duration (handled) are not decisions:
/// the engine reports them itself.
template <metrics_policy M>
void count(M& m, const decision& e) {
    if constexpr (requires { m.decided(e); }) {
        m.decided(e);
    } else {
        switch (e.kind) {
        case decision_kind::buffered: m.buffered(e.qualified_type); break;
        case decision_kind::released: m.released(e.qualified_type, e.waited); break;
        case decision_kind::duplicate: m.duplicate(e.qualified_type); break;
        case decision_kind::failed:
        case decision_kind::release_failed:
        case decision_kind::rejected: m.failed(metric_label(e.qualified_type, e.rejection)); break;
        case decision_kind::overflowed:
            if constexpr (requires { m.buffer_overflow(e.sequence, e.overflow); }) m.buffer_overflow(e.sequence, e.overflow);
            break;
        case decision_kind::gap_timed_out:
            if constexpr (requires { m.gap_timed_out(e.sequence, e.gap); }) m.gap_timed_out(e.sequence, e.gap);
            break;
        default: break;  // processed, not_sequenced, expired, closed: no count of their own
        }
    }
}

}  // namespace seqinbox::metrics
