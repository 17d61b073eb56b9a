#pragma once
// Numbered sequences (README, "Numbered sequences"): messages carry a number within their context
// and are released in strictly increasing order without gaps; a gap may time out.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace seqinbox {

/// What happens once a context has waited longer than the sequence's gap timeout for a number.
enum class gap_policy {
    hold,         ///< keep waiting until an operator skips the gap (or the instance expires)
    skip,         ///< give the missing numbers up: release what follows, log and count the gap
    dead_letter,  ///< the WAITING messages go to the error sink; the context then expects the number after them
};

constexpr std::string_view to_string(gap_policy p) noexcept {
    switch (p) {
    case gap_policy::hold: return "hold";
    case gap_policy::skip: return "skip";
    case gap_policy::dead_letter: return "dead-letter";
    }
    return "?";
}

/// The policy named `name` (as to_string writes it, the YAML spelling), if any.
constexpr std::optional<gap_policy> parse_gap_policy(std::string_view name) noexcept {
    for (gap_policy p : {gap_policy::hold, gap_policy::skip, gap_policy::dead_letter})
        if (to_string(p) == name) return p;
    return std::nullopt;
}

/// The numbering of a sequence whose message types declare a sequence number
/// (message_declaration::sequence_number); ignored by a sequence whose types do not.
struct numbering_rules {
    /// The number a new context expects first; empty: a context starts at the first number it sees.
    std::optional<std::int64_t> first_number = 1;
    /// How long a context may wait for a missing number before `on_gap` applies; empty: for ever
    /// (until an operator skips the gap or the instance expires).
    std::optional<std::chrono::seconds> gap_timeout{};
    gap_policy on_gap = gap_policy::hold;
};

}  // namespace seqinbox
