#pragma once
// Test-only stores with a planted defect, to show that the checks catch what they claim to
// (test_sim_checks). Each is the in-memory store with one operation replaced; the simulator
// itself runs memory::store.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <numeric>
#include <span>
#include <vector>

#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"

namespace seqinbox::sim {

enum class planted_defect {
    removal_drops_waiting,  ///< housekeeping removal deletes WAITING messages without forwarding them
    expire_replays,         ///< the action job reads EXPIRE as CONSUME: it runs the listener
    /// Defect 1 of issue 17 put back: the simulated processes' instance caches survive lost
    /// connections and their locked rows report what the cache believed (process_store.hpp).
    instance_cache_after_crash,
    /// claim_batch answers in key order rather than in the order of the requests (as a batch
    /// statement whose rows come back ORDER BY key would), so results go to the wrong deliveries.
    batch_claim_in_key_order,
    /// Defect 1 of issue 33 put back: a batch worker's process resolves the batch's instances
    /// after BEGIN on a second pooled connection (process_store.hpp).
    batch_instances_in_transaction,
    /// Bounded buffers without their bound: count_waiting answers 0, so the engine's overflow
    /// check never fires and a full instance buffers on (buffer_over_limit).
    overflow_check_skipped,
    /// Numbered sequences releasing past a gap: last_released_number answers one more than the
    /// highest number released, so the engine expects the number after the next one.
    number_gap_released,
    /// Numbered sequences without the duplicate check of WAITING numbers: waiting_numbered finds
    /// nothing from a given number, so a second key of a WAITING number is stored beside it.
    number_duplicate_check_skipped,
};

template <planted_defect Defect>
class planted_store : public memory::store {
public:
    using memory::store::store;

    class transaction : public memory::store::transaction {
    public:
        explicit transaction(memory::store::transaction&& tx) : memory::store::transaction(std::move(tx)) {}

        seqinbox::pending_actions pending_actions(instance_id instance) {
            auto actions = memory::store::transaction::pending_actions(instance);
            if constexpr (Defect == planted_defect::expire_replays)
                for (auto& request : actions.on_messages) request.action = message_action::consume;
            return actions;
        }

        std::vector<claim_result> claim_batch(std::span<const claim_request> requests) {
            auto results = memory::store::transaction::claim_batch(requests);
            if constexpr (Defect == planted_defect::batch_claim_in_key_order) {
                std::vector<std::size_t> by_key(requests.size());
                std::iota(by_key.begin(), by_key.end(), std::size_t{0});
                std::ranges::stable_sort(by_key, {}, [&](std::size_t i) { return requests[i].key; });
                std::vector<claim_result> misplaced;
                for (std::size_t i : by_key) misplaced.push_back(std::move(results[i]));
                return misplaced;
            }
            return results;
        }

        std::optional<std::int64_t> last_released_number(instance_id instance) {
            auto last = memory::store::transaction::last_released_number(instance);
            if constexpr (Defect == planted_defect::number_gap_released)
                if (last) ++*last;
            return last;
        }

        std::vector<message_record> waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit) {
            // The engine's duplicate check asks for one row from the number itself; the release
            // pass and the gap job ask for pages, or from the lowest number.
            if constexpr (Defect == planted_defect::number_duplicate_check_skipped)
                if (limit == 1 && from != std::numeric_limits<std::int64_t>::min()) return {};
            return memory::store::transaction::waiting_numbered(instance, from, limit);
        }

        std::size_t count_waiting(instance_id instance, std::size_t up_to) {
            if constexpr (Defect == planted_defect::overflow_check_skipped) return 0;
            return memory::store::transaction::count_waiting(instance, up_to);
        }
    };

    transaction begin() { return transaction(memory::store::begin()); }

    std::size_t remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward) {
        if constexpr (Defect != planted_defect::removal_drops_waiting) return memory::store::remove_instances(ids, condition, forward);
        return memory::store::remove_instances(ids, condition, [&](const sequence_instance& instance, std::span<const message_record>) {
            forward(instance, {});
        });
    }
};

/// Whether the processes on `Store` keep the planted instance cache (see process_store).
template <class Store>
inline constexpr bool planted_instance_cache = false;
template <>
inline constexpr bool planted_instance_cache<planted_store<planted_defect::instance_cache_after_crash>> = true;

/// Whether the processes on `Store` resolve a batch's instances after BEGIN (see process_store).
template <class Store>
inline constexpr bool planted_late_instances = false;
template <>
inline constexpr bool planted_late_instances<planted_store<planted_defect::batch_instances_in_transaction>> = true;

static_assert(action_store<planted_store<planted_defect::expire_replays>>);
static_assert(batch_claim_transaction<planted_store<planted_defect::batch_claim_in_key_order>::transaction>);
static_assert(housekeeping_store<planted_store<planted_defect::removal_drops_waiting>>);
static_assert(claim_transaction<planted_store<planted_defect::overflow_check_skipped>::transaction>);

}  // namespace seqinbox::sim
