#pragma once
// Everything a seed decides before the first step: the declaration, the workload and how
// often faults and operations (operator actions, housekeeping) are drawn. The scheduler draws from its own stream of the same seed.
#include <chrono>
#include <cstdint>
#include <optional>

#include "declaration_gen.hpp"
#include "numbered_gen.hpp"
#include "seqinbox/memory/store.hpp"
#include "random.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

struct scenario {
    std::uint64_t seed = 0;
    declarations<message> decls;
    std::size_t declarations_rejected = 0;
    workload work;
    unsigned fault_percent = 100;      ///< scales the weight of every fault step kind
    unsigned operation_percent = 100;  ///< scales the weight of every operation step kind
    std::size_t batch_size = 2;        ///< most records a poll_batch worker decides at once
    /// Listeners join the claim transaction (propagation::required, where savepoints scope
    /// them), else run outside any (not_supported).
    bool required = false;
    /// The store's server limits (memory::store_options): max_batch_records (0: none), and the
    /// lock table share of a transaction, which leaves lock_reserve entries to release passes
    /// and later rounds, as PostgreSQL leaves the rest of its table.
    std::size_t max_batch_records = 0;
    std::size_t lock_entries = 0;
    static constexpr std::size_t lock_reserve = 8;

    bool numbered() const { return decls.sequences.front().numbered(); }
    /// The gap timeout of a numbered seed that declares one.
    std::optional<std::chrono::seconds> gap_timeout() const {
        return numbered() ? decls.sequences.front().numbering.gap_timeout : std::nullopt;
    }

    memory::store_options store_options() const { return {.lock_entries = lock_entries, .max_batch_records = max_batch_records}; }
};

inline scenario make_scenario(std::uint64_t seed) {
    random rng(seed);
    scenario s;
    s.seed = seed;
    auto drawn = random_declarations(rng);
    s.decls = std::move(drawn.value);
    s.declarations_rejected = drawn.rejected;
    s.work = random_workload(s.decls, rng);
    static constexpr unsigned fault_levels[] = {0, 50, 100, 200};
    s.fault_percent = fault_levels[rng.below(4)];
    s.operation_percent = fault_levels[rng.below(4)];  // drawn after the rest: the draws above stay as they were
    s.batch_size = rng.chance(20) ? s.work.deliveries.size() : rng.between(2, 4);  // drawn last, likewise
    s.required = rng.chance(50);
    s.max_batch_records = rng.chance(20) ? 0 : rng.between(1, 6);  // so that batches come in parts
    s.lock_entries = s.max_batch_records == 0 ? 0 : s.max_batch_records + scenario::lock_reserve;
    s.decls.sequences.front().buffer = draw_buffer_limit(rng);  // drawn last: the draws above stay as they were
    draw_numbered(s.decls, s.work, seed);  // a stream of its own: the draws above stay as they were
    return s;
}

/// The scheduler's stream: independent of the draws above, so that they can change separately.
inline random scheduler_random(std::uint64_t seed) { return random(seed ^ 0x5eed'5c4e'd01e'0000ULL); }

}  // namespace seqinbox::sim
