#pragma once
#include "seqinbox/claim/concept.hpp"

namespace seqinbox::claim {

/// The legacy behaviour the claim replaced: no claim at all. The only guard is the engine's
/// lookup of an existing sequenced message (the "check") followed later by the row insert.
/// Two concurrent deliveries both pass the check, so both invoke the listener. Kept so that
/// tests can show that race; never use it in production.
struct check_then_insert {
    static constexpr bool checks_before_locking = true;

    template <class Tx>
    static claim_outcome acquire(Tx&, const claim_key&, instance_id, timestamp) {
        return claim_outcome::claimed;
    }

    template <class Tx>
    static void forget(Tx&, const claim_key&) {}
};

}  // namespace seqinbox::claim
