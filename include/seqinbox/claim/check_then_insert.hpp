#pragma once
#include <cstddef>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "seqinbox/claim/concept.hpp"

namespace seqinbox::claim {

/// The legacy behaviour the claim replaced: no claim at all. The only guard is the lookup of an
/// existing sequenced message (the "check"), made before the instance lock as the engine before
/// the claim did, followed later by the row insert. Two concurrent deliveries both pass the
/// check, so both invoke the listener. Kept so that tests can show that race; never use it in
/// production. (Read under the lock, the rows would serialise duplicates of one context on
/// their own and hide most of the race.)
struct check_then_insert {
    template <inbox_state_transaction Tx>
    static claim_result acquire(Tx& tx, const claim_request& request) {
        std::vector<message_record> rows = tx.find_messages(request.key);
        return {true, tx.lock_instance(request.instance), std::move(rows)};
    }

    /// The checks first, then the instance locks in id order, as a batch claim takes them.
    template <inbox_state_transaction Tx>
    static std::vector<claim_result> acquire_batch(Tx& tx, std::span<const claim_request> requests) {
        std::vector<claim_result> results;
        for (const auto& request : requests) results.push_back({true, {}, tx.find_messages(request.key)});
        std::map<instance_id, instance_lock> locks;
        for (const auto& request : requests) locks.emplace(request.instance, instance_lock{});
        for (auto& [id, lock] : locks) lock = tx.lock_instance(id);
        for (std::size_t i = 0; i < requests.size(); ++i) results[i].locked = locks.at(requests[i].instance);
        return results;
    }

    template <inbox_state_transaction Tx>
    static void forget(Tx&, const claim_key&) {}
};

}  // namespace seqinbox::claim
