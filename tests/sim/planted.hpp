#pragma once
// Test-only stores with a planted defect, to show that the checks catch what they claim to
// (test_sim_checks). Each is the in-memory store with one operation replaced; the simulator
// itself runs memory::store.
#include <span>

#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/housekeeping.hpp"

namespace seqinbox::sim {

enum class planted_defect {
    removal_drops_waiting,  ///< housekeeping removal deletes WAITING messages without forwarding them
    expire_replays,         ///< the action job reads EXPIRE as CONSUME: it runs the listener
    /// Defect 1 of issue 17 put back: the simulated processes' instance caches survive lost
    /// connections and their locked rows report what the cache believed (process_store.hpp).
    instance_cache_after_crash,
};

template <planted_defect Defect>
class planted_store : public memory::store {
public:
    class transaction : public memory::store::transaction {
    public:
        explicit transaction(memory::store::transaction&& tx) : memory::store::transaction(std::move(tx)) {}

        seqinbox::pending_actions pending_actions(instance_id instance) {
            auto actions = memory::store::transaction::pending_actions(instance);
            if constexpr (Defect == planted_defect::expire_replays)
                for (auto& request : actions.on_messages) request.action = message_action::consume;
            return actions;
        }
    };

    transaction begin() { return transaction(memory::store::begin()); }

    bool remove_instance(instance_id id, const forward_waiting& forward) {
        if constexpr (Defect != planted_defect::removal_drops_waiting) return memory::store::remove_instance(id, forward);
        return memory::store::remove_instance(id, [&](const sequence_instance& instance, std::span<const message_record>) {
            forward(instance, {});
        });
    }
};

/// Whether the processes on `Store` keep the planted instance cache (see process_store).
template <class Store>
inline constexpr bool planted_instance_cache = false;
template <>
inline constexpr bool planted_instance_cache<planted_store<planted_defect::instance_cache_after_crash>> = true;

static_assert(action_store<planted_store<planted_defect::expire_replays>>);
static_assert(housekeeping_store<planted_store<planted_defect::removal_drops_waiting>>);

}  // namespace seqinbox::sim
