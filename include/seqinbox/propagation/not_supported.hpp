#pragma once
#include "seqinbox/propagation/concept.hpp"

namespace seqinbox::propagation {

/// The step runs outside any inbox transaction (T1 is suspended); the default for listeners,
/// which may open their own business transaction.
struct not_supported {
    static constexpr bool joins_claim_transaction = false;

    template <class Store, class Step>
    static void run(Store&, typename Store::transaction&, Step&& step) {
        step(static_cast<typename Store::transaction*>(nullptr));
    }
};

}  // namespace seqinbox::propagation
