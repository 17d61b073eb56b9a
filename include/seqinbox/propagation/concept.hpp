#pragma once
// Transaction propagation: how a transactional step relates to the claim transaction T1.
// `P::run(store, t1, step)` calls `step(tx)` where `tx` is a pointer to the store transaction the
// step must use (or nullptr when it runs outside any inbox transaction), and ends that
// transaction if the policy opened it: commit when `step` returns, roll back when it throws.
// A policy that joins the claim transaction needs a store with savepoints: the engine scopes
// each replayed listener's writes in T1 by one, so that a failing replay undoes only its own.
#include <concepts>

#include "seqinbox/store/concept.hpp"

namespace seqinbox {

namespace detail {
template <class Tx>
struct probe_step {
    void operator()(Tx*) const {}
};
}  // namespace detail

template <class P, class Store>
concept propagation_policy = requires(Store& store, typename Store::transaction& outer) {
    { P::joins_claim_transaction } -> std::convertible_to<bool>;
    P::run(store, outer, detail::probe_step<typename Store::transaction>{});
} && (!P::joins_claim_transaction || savepoint_transaction<typename Store::transaction>);

}  // namespace seqinbox
