#pragma once
// The metrics sink policy. Calls happen on the delivering thread; a sink shared by several
// threads must be thread-safe. `type` is a declared qualified type, or for a rejected delivery
// the name of its rejection (seqinbox/outcome.hpp): never text a record chose.
#include <chrono>
#include <concepts>
#include <string_view>

#include "seqinbox/outcome.hpp"

namespace seqinbox {

/// The one label metrics give a message: its qualified type, which is declared, or for a
/// rejected delivery why it was rejected. Never the record's own text: anyone can send types
/// that are long, invalid UTF-8 or new every time, and each would be a series of its own.
constexpr std::string_view metric_label(std::string_view qualified_type, rejection why) noexcept {
    return why == rejection::none ? qualified_type : to_string(why);
}

template <class M>
concept metrics_policy = requires(M& m, std::string_view type, std::chrono::nanoseconds d) {
    { m.consumed(type) } -> std::same_as<void>;     ///< a listener completed for a sequenced message
    { m.buffered(type) } -> std::same_as<void>;     ///< a message started waiting
    { m.released(type, d) } -> std::same_as<void>;  ///< a waiting message was released after d
    { m.failed(type) } -> std::same_as<void>;       ///< a listener threw or a message was rejected
    { m.duplicate(type) } -> std::same_as<void>;    ///< a delivery was skipped as already handled
    { m.handled(type, d) } -> std::same_as<void>;   ///< one delivery took d end to end
};
// Optional, used when a sink has it: `m.action_executed(d)` — the pending operator actions of
// one instance took d (basic_inbox::run_pending_actions); `m.decided(e)` — takes each decision
// (seqinbox/decision.hpp) instead of the buffered, released, failed and duplicate calls it
// implies (seqinbox/metrics/decision_counts.hpp); `m.buffer_overflow(sequence, policy)` — a message
// had to wait in an instance of `sequence` whose buffer was full, and `policy` applied;
// `m.gap_timed_out(sequence, policy)` — numbers were missing in an instance of the numbered
// `sequence` past its gap timeout, and `policy` applied (at every job run while a gap is held).

}  // namespace seqinbox
