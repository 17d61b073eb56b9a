#pragma once
// The step kinds the scheduler chooses from. A run is a list of steps; a seed draws the list, a
// replay or the shrinker feeds one back (a step that does not apply at that point is skipped).
//
// Extending: to add a kind (say an operator action or a housekeeping run), declare a struct below
// with its `kind_info` (name, weight, fault flag) and one size_t operand, append it to `step`,
// and give `simulation` three overloads: `operands(kind<K>)` (how many operand values exist),
// `allows(const K&)` (may it run now) and `apply(const K&)`. The weighted draw, the script
// replay, the trace and the shrinker take it from the variant; the compiler points at every
// overload that is missing.
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace seqinbox::sim {

/// What the scheduler knows of a step kind: its name in traces, its weight in the draw, and
/// whether it is a fault (fault weights scale with the seed's fault level).
struct kind_info {
    std::string_view name;
    unsigned weight;
    bool fault;
};

/// The consumer's task runs to its next store operation or yield point (a worker is started
/// first when the consumer has records but no task).
struct advance { static constexpr kind_info info{"advance", 100, false}; std::size_t consumer; };

/// The planned delivery reaches its consumer's source.
struct arrive { static constexpr kind_info info{"arrive", 30, false}; std::size_t delivery; };

/// The listener the consumer's task is inside throws (its delivery fails: FAILED, error sink,
/// T1 rolled back on the direct path; FAILED and claim deleted on the release pass).
struct listener_throw { static constexpr kind_info info{"listener_throw", 8, true}; std::size_t consumer; };

/// The database connections of the consumer's task die (step_driver::lose_connection): its open
/// transactions roll back, with the claim and the instance lock they hold.
struct lose_connection { static constexpr kind_info info{"lose_connection", 3, true}; std::size_t consumer; };

/// Only the claim transaction's connection dies (the task's oldest open transaction), as when
/// pg_terminate_backend ends that one backend: a REQUIRES_NEW state step in flight lives on.
struct lose_claim_connection { static constexpr kind_info info{"lose_claim_connection", 3, true}; std::size_t consumer; };

/// The consumer dies after the durable decision but before acknowledging; on restart the source
/// redelivers what was not acknowledged.
struct crash_before_ack { static constexpr kind_info info{"crash_before_ack", 6, true}; std::size_t consumer; };

/// An operator re-sends error-sink record number `failure` (through consumer failure % consumers).
struct resend { static constexpr kind_info info{"resend", 4, false}; std::size_t failure; };

using step = std::variant<advance, arrive, listener_throw, lose_connection, lose_claim_connection, crash_before_ack, resend>;

/// Tag to select a step kind in overloads without an operand.
template <class Kind>
struct kind {};

inline std::string describe(const step& s) {
    return std::visit(
        [](const auto& k) {
            std::string text(k.info.name);
            if constexpr (requires { k.consumer; }) text += " c" + std::to_string(k.consumer);
            if constexpr (requires { k.delivery; }) text += " d" + std::to_string(k.delivery);
            if constexpr (requires { k.failure; }) text += " f" + std::to_string(k.failure);
            return text;
        },
        s);
}

}  // namespace seqinbox::sim
