#pragma once
#include "seqinbox/claim/concept.hpp"

namespace seqinbox::claim {

/// The transactional insert-first claim of the design note: the database arbitrates
/// concurrent deliveries through the claim table's primary key.
struct insert_first {
    template <class Tx>
    static claim_outcome acquire(Tx& tx, const claim_key& key, instance_id instance, timestamp now) {
        return tx.insert_claim(key, instance, now) ? claim_outcome::claimed : claim_outcome::already_claimed;
    }

    template <class Tx>
    static void forget(Tx& tx, const claim_key& key) {
        tx.delete_claim(key);
    }
};

}  // namespace seqinbox::claim
