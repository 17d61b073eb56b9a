#pragma once
// Where the steps of a run come from: a seeded weighted draw among the steps that apply now, or
// a script (replay, shrinking) whose inapplicable steps are skipped and which, once exhausted,
// runs the rest without faults in a fixed order.
#include <cstddef>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "random.hpp"
#include "scenario.hpp"
#include "steps.hpp"

namespace seqinbox::sim {

/// Calls `visit(kind<K>{})` for every alternative K of `step`, in declaration order.
template <class Visit>
void for_each_kind(Visit&& visit) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (visit(kind<std::variant_alternative_t<I, step>>{}), ...);
    }(std::make_index_sequence<std::variant_size_v<step>>{});
}

/// Every step of kind K that applies now, operand by operand.
template <class K, class Sim>
void add_candidates(const Sim& sim, std::vector<step>& out) {
    for (std::size_t i = 0; i < sim.operands(kind<K>{}); ++i)
        if (K k{i}; sim.allows(k)) out.emplace_back(k);
}

class random_chooser {
public:
    /// The scheduler of the seed of `s`, with its fault and operation levels.
    explicit random_chooser(const scenario& s)
        : rng_(scheduler_random(s.seed)), fault_percent_(s.fault_percent), operation_percent_(s.operation_percent) {}

    /// A kind drawn by weight among the kinds with a candidate, then one of its candidates.
    template <class Sim>
    std::optional<step> operator()(const Sim& sim) {
        std::vector<std::pair<unsigned, std::vector<step>>> kinds;
        for_each_kind([&]<class K>(kind<K>) {
            const unsigned weight = weight_of(K::info);
            if (weight == 0) return;
            std::vector<step> candidates;
            add_candidates<K>(sim, candidates);
            if (!candidates.empty()) kinds.emplace_back(weight, std::move(candidates));
        });
        return rng_.pick_weighted(kinds);
    }

private:
    unsigned weight_of(const kind_info& info) const {
        switch (info.scale) {
        case scaled_by::faults: return info.weight * fault_percent_ / 100;
        case scaled_by::operations: return info.weight * operation_percent_ / 100;
        case scaled_by::nothing: break;
        }
        return info.weight;
    }

    random rng_;
    unsigned fault_percent_;
    unsigned operation_percent_;
};

class script_chooser {
public:
    explicit script_chooser(const std::vector<step>& script) : script_(&script) {}

    template <class Sim>
    std::optional<step> operator()(const Sim& sim) {
        while (next_ < script_->size()) {
            const step& s = (*script_)[next_++];
            if (sim.allows(s)) return s;
        }
        return drain(sim);
    }

private:
    /// After the script: advance the first task that can, else the first pending arrival, else
    /// run the pending-action job.
    template <class Sim>
    static std::optional<step> drain(const Sim& sim) {
        std::vector<step> candidates;
        add_candidates<advance>(sim, candidates);
        if (candidates.empty()) add_candidates<arrive>(sim, candidates);
        if (candidates.empty()) add_candidates<run_actions>(sim, candidates);
        if (candidates.empty()) return std::nullopt;
        return candidates.front();
    }

    const std::vector<step>* script_;
    std::size_t next_ = 0;
};

}  // namespace seqinbox::sim
