#pragma once
#include "seqinbox/propagation/concept.hpp"

namespace seqinbox::propagation {

/// The step runs in a transaction of its own, committed before T1 goes on (T1 is suspended).
struct requires_new {
    static constexpr bool joins_claim_transaction = false;

    template <class Store, class Step>
    static void run(Store& store, typename Store::transaction&, Step&& step) {
        auto tx = store.begin();  // rolls back on scope exit if step throws
        step(&tx);
        tx.commit();
    }
};

}  // namespace seqinbox::propagation
