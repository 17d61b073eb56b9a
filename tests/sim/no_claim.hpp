#pragma once
// A test-only claim strategy with the claim step taken out of the flow: every delivery "wins"
// and nothing is written. It exists to show that the simulator's checks fail without the claim.
#include "seqinbox/claim/concept.hpp"

namespace seqinbox::sim {

struct no_claim {
    template <class Tx>
    static claim_outcome acquire(Tx&, const claim_key&, instance_id, timestamp) {
        return claim_outcome::claimed;
    }

    template <class Tx>
    static void forget(Tx&, const claim_key&) {}
};

}  // namespace seqinbox::sim
