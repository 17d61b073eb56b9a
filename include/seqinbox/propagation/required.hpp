#pragma once
#include "seqinbox/propagation/concept.hpp"

namespace seqinbox::propagation {

/// The step joins the claim transaction T1: a listener writing to the same database commits
/// atomically with the inbox state, which is then also written in T1 (exactly-once effects).
struct required {
    static constexpr bool joins_claim_transaction = true;

    template <class Store, class Step>
    static void run(Store&, typename Store::transaction& outer, Step&& step) {
        step(&outer);
    }
};

}  // namespace seqinbox::propagation
