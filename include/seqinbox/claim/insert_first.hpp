#pragma once
#include <span>
#include <vector>

#include "seqinbox/claim/concept.hpp"

namespace seqinbox::claim {

/// The transactional insert-first claim of the design note: the database arbitrates
/// concurrent deliveries through the claim table's primary key.
struct insert_first {
    template <claim_transaction Tx>
    static claim_result acquire(Tx& tx, const claim_request& request) {
        return tx.claim(request);
    }

    template <batch_claim_transaction Tx>
    static std::vector<claim_result> acquire_batch(Tx& tx, std::span<const claim_request> requests) {
        return tx.claim_batch(requests);
    }

    template <claim_transaction Tx>
    static void forget(Tx& tx, const claim_key& key) {
        tx.delete_claim(key);
    }
};

}  // namespace seqinbox::claim
