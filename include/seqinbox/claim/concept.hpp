#pragma once
// The claim strategy policy: how a delivery becomes the only one allowed to handle its key.
#include <concepts>
#include <span>
#include <vector>

#include "seqinbox/store/concept.hpp"

namespace seqinbox {

/// A claim strategy, used inside the claim transaction T1:
///  - `acquire(tx, request)` is the first operation of T1. It decides whether this delivery may
///    go on (`won`: the key is held until T1 ends) or skips, writing nothing; when it goes on,
///    the result also holds the instance, locked, with its types, and the key's rows. An
///    instance that no longer exists throws seqinbox::error(retryable) with SQLSTATE 23503;
///  - `forget(tx, key)` runs in the transaction that marks a buffered message FAILED, so that a
///    resend can claim and retry it.
/// Strategies are stateless types.
template <class C, class Tx>
concept claim_policy = requires(Tx& tx, const claim_request& request, const claim_key& key) {
    { C::acquire(tx, request) } -> std::same_as<claim_result>;
    { C::forget(tx, key) } -> std::same_as<void>;
};

/// A claim strategy that also claims a batch (basic_inbox::deliver_batch): `acquire_batch(tx,
/// requests)` answers as acquire on each request would, in the order of steps that
/// batch_claim_transaction gives (claims, then instance locks in id order). Keys are distinct.
template <class C, class Tx>
concept batch_claim_policy = claim_policy<C, Tx> && requires(Tx& tx, std::span<const claim_request> requests) {
    { C::acquire_batch(tx, requests) } -> std::same_as<std::vector<claim_result>>;
};

}  // namespace seqinbox
