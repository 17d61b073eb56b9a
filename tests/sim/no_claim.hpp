#pragma once
// A test-only claim strategy with the claim step taken out of the flow: every delivery "wins"
// and nothing is written. It exists to show that the simulator's checks fail without the claim.
// Like the engine before the claim, it reads the key's rows before the instance lock: read under
// the lock, they serialise duplicates of one context on their own (found in issue 17), and the
// checks could only catch the missing claim through a lock on an instance a crash removed.
#include "seqinbox/claim/concept.hpp"

namespace seqinbox::sim {

struct no_claim {
    static constexpr bool checks_before_locking = true;

    template <class Tx>
    static claim_outcome acquire(Tx&, const claim_key&, instance_id, timestamp) {
        return claim_outcome::claimed;
    }

    template <class Tx>
    static void forget(Tx&, const claim_key&) {}
};

}  // namespace seqinbox::sim
