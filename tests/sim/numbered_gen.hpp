#pragma once
// Numbered sequences (issue 38) in the simulator: a quarter of the seeds declare one numbered
// sequence (1 to 3 types sharing each context's numbers) with a random first number or none
// (first seen), sometimes a gap timeout under a random policy, and a workload whose records
// carry numbers: shuffled, duplicated, some numbers never sent (gaps), some sent twice under
// other keys (duplicates of a number). Drawn from a stream of its own after the rest, so that
// the other seeds' draws stay as they were.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "declaration_gen.hpp"
#include "random.hpp"
#include "seqinbox/declare/example.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/declare/problems.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

/// The numbered draw's stream of a seed.
inline random numbered_random(std::uint64_t seed) { return random(seed ^ 0x6e75'6d62'6572'6564ULL); }

inline numbering_rules random_numbering(random& rng) {
    numbering_rules rules;
    rules.first_number = rng.chance(30) ? std::nullopt : std::optional<std::int64_t>(static_cast<std::int64_t>(rng.between(1, 3)));
    if (rng.chance(60)) rules.gap_timeout = std::chrono::seconds(rng.between(60, 600));
    static constexpr gap_policy policies[] = {gap_policy::hold, gap_policy::skip, gap_policy::dead_letter};
    rules.on_gap = policies[rng.below(3)];
    return rules;
}

/// 1 to 3 types without release conditions, numbered by the header `seq`; the buffer bound
/// drawn for the seed stays.
inline sequence_declaration<message> numbered_sequence(random& rng, const buffer_limit& buffer) {
    sequence_declaration<message> seq;
    seq.name = "SimSequence";
    seq.retention = sequence_retention;
    seq.buffer = buffer;
    seq.numbering = random_numbering(rng);
    const std::size_t types = rng.between(1, 3);
    for (std::size_t i = 0; i < types; ++i) {
        auto m = testing::declare(type_name(i));
        m.sequence_number = example::header_number<message>("seq");
        seq.messages.push_back(std::move(m));
    }
    return seq;
}

/// Numbers from the first (or a random start) on: 15 % never sent, 10 % sent under a second
/// key, sometimes one below the start; each under a random type.
inline void add_numbered_context(workload& w, const sequence_declaration<message>& seq, const std::string& context, random& rng) {
    const std::int64_t start = seq.numbering.first_number.value_or(static_cast<std::int64_t>(rng.between(1, 5)));
    const std::int64_t count = static_cast<std::int64_t>(rng.between(2, 7));
    const auto add = [&](std::int64_t number) {
        const auto& type = seq.messages[rng.below(seq.messages.size())];
        w.messages.push_back({type.qualified_type(), "m" + std::to_string(w.messages.size()), context, number});
    };
    if (rng.chance(10)) add(start - 1);
    for (std::int64_t n = start; n < start + count; ++n) {
        if (rng.chance(15)) continue;
        add(n);
        if (rng.chance(10)) add(n);
    }
}

/// Turns a quarter of the seeds into numbered ones: their declaration and workload are replaced.
inline void draw_numbered(declarations<message>& decls, workload& w, std::uint64_t seed) {
    random rng = numbered_random(seed);
    if (!rng.chance(25)) return;
    declarations<message> numbered;
    numbered.sequences.push_back(numbered_sequence(rng, decls.sequences.front().buffer));
    if (!find_problems(numbered).empty()) return;  // the simulator's draw is wrong: keep the graph seed
    workload drawn;
    drawn.consumers = rng.between(2, 4);
    const std::size_t contexts = rng.between(1, 3);
    for (std::size_t c = 0; c < contexts; ++c) add_numbered_context(drawn, numbered.sequences.front(), "ctx" + std::to_string(c), rng);
    plan_deliveries(drawn, rng);
    decls = std::move(numbered);
    w = std::move(drawn);
}

/// The number of `key` in `w`, if it is numbered.
inline std::optional<std::int64_t> number_of(const workload& w, const claim_key& key) {
    for (const auto& m : w.messages)
        if (m.key() == key) return m.number;
    return std::nullopt;
}

}  // namespace seqinbox::sim
