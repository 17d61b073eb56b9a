#pragma once
// A random declaration per seed: one sequence of 2 to 6 types whose release conditions are
// random after / all_of / any_of trees. The library's own validation decides what is acceptable
// (a cycle, a self reference or a duplicate predecessor is rejected); a rejected draw is redrawn.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "random.hpp"
#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/problems.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "support/world.hpp"

namespace seqinbox::sim {

using message = testing::message;

/// The retention of every drawn sequence; operations.hpp moves the clock past it.
inline constexpr std::chrono::hours sequence_retention{24};

inline std::string type_name(std::size_t index) { return "T" + std::to_string(index); }

/// Mostly earlier types (acyclic), sometimes any type, so that validation has work to do.
inline std::size_t random_predecessor(random& rng, std::size_t self, std::size_t types) {
    if (self > 0 && rng.chance(80)) return rng.below(self);
    return rng.below(types);
}

inline condition random_condition(random& rng, std::size_t self, std::size_t types, int depth) {
    if (depth == 0 || rng.chance(50)) return after(type_name(random_predecessor(rng, self, types)));
    std::vector<condition> children;
    const std::size_t count = rng.between(2, 3);
    for (std::size_t i = 0; i < count; ++i) children.push_back(random_condition(rng, self, types, depth - 1));
    return rng.chance(50) ? all_of(std::move(children)) : any_of(std::move(children));
}

inline declarations<message> draw_declarations(random& rng) {
    sequence_declaration<message> seq;
    seq.name = "SimSequence";
    seq.retention = sequence_retention;
    const std::size_t types = rng.between(2, 6);
    for (std::size_t i = 0; i < types; ++i)
        seq.messages.push_back(testing::declare(type_name(i), i == 0 || rng.chance(25) ? condition{} : random_condition(rng, i, types, 2)));
    declarations<message> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

struct drawn_declarations {
    declarations<message> value;
    std::size_t rejected = 0;  ///< draws the validation refused before this one
};

/// Draws until the validation accepts; "always" everywhere is the fallback that cannot fail.
inline drawn_declarations random_declarations(random& rng) {
    drawn_declarations drawn;
    for (; drawn.rejected < 1000; ++drawn.rejected) {
        drawn.value = draw_declarations(rng);
        if (find_problems(drawn.value).empty()) return drawn;
    }
    for (auto& m : drawn.value.sequences.front().messages) m.release = condition{};
    return drawn;
}

/// The buffer bound of a third of the seeds: maxWaiting 1 to 3 under one of the three overflow
/// policies, small enough for a workload of a few messages per context to overflow it. The
/// other seeds keep the default (10,000), which no workload reaches.
inline buffer_limit draw_buffer_limit(random& rng) {
    if (!rng.chance(33)) return {};
    static constexpr overflow_policy policies[] = {overflow_policy::dead_letter_newest, overflow_policy::dead_letter_instance,
                                                   overflow_policy::reject};
    const std::size_t max_waiting = rng.between(1, 3);
    return {max_waiting, policies[rng.below(3)]};
}

}  // namespace seqinbox::sim
