#pragma once
// The step kinds the scheduler chooses from. A run is a list of steps; a seed draws the list, a
// replay or the shrinker feeds one back (a step that does not apply at that point is skipped).
//
// Extending: to add a kind (say a new fault), declare a struct below
// with its `kind_info` (name, weight, scale, operand prefix) and one size_t operand, append it to `step`,
// and give `simulation` three overloads: `operands(kind<K>)` (how many operand values exist),
// `allows(const K&)` (may it run now) and `apply(const K&)`. The weighted draw, the script
// replay, the trace and the shrinker take it from the variant; the compiler points at every
// overload that is missing.
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace seqinbox::sim {

/// Which of the seed's levels scales a kind's weight: none, its fault level or its operations
/// level (operator actions, housekeeping, time passing).
enum class scaled_by { nothing, faults, operations };

/// What the scheduler knows of a step kind: its name in traces, its weight in the draw, what
/// scales that weight, and the letter before its operand in traces.
struct kind_info {
    std::string_view name;
    unsigned weight;
    scaled_by scale;
    std::string_view operand;
};

/// The task in slot `consumer` (a consumer, an action runner, a housekeeper or the operator's
/// console) runs to its next store operation or yield point (a consumer's worker is started
/// first when it has records but no task).
struct advance { static constexpr kind_info info{"advance", 100, scaled_by::nothing, "c"}; std::size_t consumer; };

/// The consumer's worker is started in batch mode (it has records but no task): until its source
/// is empty it polls up to the seed's batch size at once and decides them with deliver_batch, in
/// one transaction. Other consumers may run one delivery at a time meanwhile.
struct poll_batch { static constexpr kind_info info{"poll_batch", 40, scaled_by::nothing, "c"}; std::size_t consumer; };

/// The planned delivery reaches its consumer's source.
struct arrive { static constexpr kind_info info{"arrive", 30, scaled_by::nothing, "d"}; std::size_t delivery; };

/// The listener the consumer's task is inside throws (its delivery fails: FAILED, error sink,
/// T1 rolled back on the direct path; FAILED and claim deleted on the release pass).
struct listener_throw { static constexpr kind_info info{"listener_throw", 8, scaled_by::faults, "c"}; std::size_t consumer; };

/// The database connections of the consumer's task die (step_driver::lose_connection): its open
/// transactions roll back, with the claim and the instance lock they hold.
struct lose_connection { static constexpr kind_info info{"lose_connection", 3, scaled_by::faults, "c"}; std::size_t consumer; };

/// Only the claim transaction's connection dies (the task's oldest open transaction), as when
/// pg_terminate_backend ends that one backend: a REQUIRES_NEW state step in flight lives on.
struct lose_claim_connection { static constexpr kind_info info{"lose_claim_connection", 3, scaled_by::faults, "c"}; std::size_t consumer; };

/// The consumer dies after the durable decision but before acknowledging; on restart the source
/// redelivers what was not acknowledged.
struct crash_before_ack { static constexpr kind_info info{"crash_before_ack", 6, scaled_by::faults, "c"}; std::size_t consumer; };

/// The database server crashes and restarts (memory::store::crash): it keeps what was flushed
/// and the first `keep` of the later unflushed commits; every open transaction dies with a lost
/// connection. The processes live on, their instance caches with them. At most 2 per run.
struct crash_database { static constexpr kind_info info{"crash_database", 2, scaled_by::faults, "k"}; std::size_t keep; };

/// The server's lock table is full when the consumer's batch transaction next takes an entry (it
/// is parked before a savepoint, a stored message or its commit): that fails with SQLSTATE 53200
/// (memory::testing::exhaust_lock_table). The part does not commit and poll_batch gives it back
/// with the rest. At most 3 per run.
struct lock_table_full { static constexpr kind_info info{"lock_table_full", 4, scaled_by::faults, "c"}; std::size_t consumer; };

/// An operator re-sends error-sink record number `failure` (through consumer failure % consumers).
struct resend { static constexpr kind_info info{"resend", 4, scaled_by::nothing, "f"}; std::size_t failure; };

/// An operator requests an action through the store, on a task of its own (the request waits
/// while a transaction locks its target): target number `target` of the current state, two per
/// WAITING message (CONSUME, EXPIRE), then two per OPEN instance (CONSUME_ALL, CLOSE).
struct request_action { static constexpr kind_info info{"request_action", 6, scaled_by::operations, "t"}; std::size_t target; };

/// Action runner `runner` (a service instance of its own) runs the pending-action job with
/// small pages, on a task of its own.
struct run_actions { static constexpr kind_info info{"run_actions", 5, scaled_by::operations, "r"}; std::size_t runner; };

/// Housekeeper `runner` runs the three housekeeping jobs once, on a task of its own; two may run
/// at once (the store's job lock lets one of them run each job).
struct housekeep { static constexpr kind_info info{"housekeep", 4, scaled_by::operations, "h"}; std::size_t runner; };

/// The shared clock jumps: span 0 by half the retention, span 1 past the retention and the
/// removal delay, so that expiry marking and removal have work.
struct pass_time { static constexpr kind_info info{"pass_time", 2, scaled_by::operations, "s"}; std::size_t span; };

/// Numbered seeds with a gap timeout: action runner `runner` runs the gap-timeout job
/// (run_gap_timeouts) on a task of its own. None in other seeds, whose draws stay as they were.
struct time_out_gaps { static constexpr kind_info info{"time_out_gaps", 5, scaled_by::operations, "r"}; std::size_t runner; };

/// Numbered seeds with a gap timeout: the shared clock jumps by the gap timeout and a second.
struct pass_gap_time { static constexpr kind_info info{"pass_gap_time", 3, scaled_by::operations, "s"}; std::size_t span; };

using step = std::variant<advance, poll_batch, arrive, listener_throw, lose_connection, lose_claim_connection, crash_before_ack, crash_database,
                          lock_table_full, resend, request_action, run_actions, housekeep, pass_time, time_out_gaps, pass_gap_time>;

/// Tag to select a step kind in overloads without an operand.
template <class Kind>
struct kind {};

/// The one operand of a step, whatever its name.
template <class Kind>
std::size_t operand_of(const Kind& k) {
    const auto& [value] = k;
    return value;
}

inline std::string describe(const step& s) {
    return std::visit(
        [](const auto& k) { return std::string(k.info.name) + " " + std::string(k.info.operand) + std::to_string(operand_of(k)); }, s);
}

}  // namespace seqinbox::sim
