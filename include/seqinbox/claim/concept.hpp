#pragma once
// The claim strategy policy: how a delivery becomes the only one allowed to handle its key.
#include <concepts>

#include "seqinbox/store/model.hpp"

namespace seqinbox {

enum class claim_outcome {
    claimed,          ///< this delivery may go on (the key is held until its transaction ends)
    already_claimed,  ///< someone else handled or holds it: skip, write nothing
};

/// A claim strategy, used inside the claim transaction T1:
///  - `acquire(tx, key, instance, now)` is the first statement of T1 and decides the outcome;
///  - `forget(tx, key)` runs in the transaction that marks a buffered message FAILED, so that a
///    resend can claim and retry it.
/// Strategies are stateless types.
template <class C, class Tx>
concept claim_strategy = requires(Tx& tx, const claim_key& key, instance_id instance, timestamp now) {
    { C::acquire(tx, key, instance, now) } -> std::same_as<claim_outcome>;
    { C::forget(tx, key) } -> std::same_as<void>;
};

namespace claim {

/// A strategy may declare `static constexpr bool checks_before_locking = true`: the engine then
/// reads the key's rows before it locks the instance, as the engine before the claim did (only
/// check_then_insert, which shows the race the claim removes). Otherwise it reads them once it
/// holds the lock, so that it sees what the lock's previous holder stored.
template <class C>
inline constexpr bool checks_before_locking = requires { requires C::checks_before_locking; };

}  // namespace claim

}  // namespace seqinbox
