#pragma once
// Bounded buffers: how many messages one sequence instance may keep WAITING, and what happens to
// the arrival that would exceed it (README, "Bounded buffers").
#include <cstddef>
#include <optional>
#include <string_view>

namespace seqinbox {

/// What happens when a message must wait and its instance already holds max_waiting WAITING ones.
enum class overflow_policy {
    dead_letter_newest,    ///< the arrival goes to the error sink (FAILED, its claim deleted: a resend retries)
    dead_letter_instance,  ///< the instance's WAITING messages and the arrival go to the error sink
    reject,                ///< the delivery fails retryably, nothing stored: the consumer retries later (backpressure)
};

/// The limit of a sequence that declares none: an instance with one missing predecessor and a
/// chatty producer would otherwise fill the database (and housekeeping forward it all at once).
inline constexpr std::size_t default_max_waiting = 10'000;
/// The largest limit a declaration may give: what one instance's buffer may cost in memory when
/// it is released, dead-lettered or forwarded at once.
inline constexpr std::size_t most_max_waiting = 1'000'000;

/// The code (error::sqlstate()) of the retryable error thrown for a delivery rejected under
/// overflow_policy::reject: PostgreSQL's configuration_limit_exceeded, maxWaiting being a declared
/// limit. It tells a full buffer from other retryable failures: the relay decides the records of
/// such a batch one at a time when they come again, so that the records behind the rejected one
/// (its predecessor among them) are decided rather than rejected with it again and again.
inline constexpr std::string_view buffer_full_sqlstate = "53400";

constexpr std::string_view to_string(overflow_policy p) noexcept {
    switch (p) {
    case overflow_policy::dead_letter_newest: return "dead-letter-newest";
    case overflow_policy::dead_letter_instance: return "dead-letter-instance";
    case overflow_policy::reject: return "reject";
    }
    return "?";
}

/// The policy named `name` (as to_string writes it, the YAML spelling), if any.
constexpr std::optional<overflow_policy> parse_overflow_policy(std::string_view name) noexcept {
    for (overflow_policy p : {overflow_policy::dead_letter_newest, overflow_policy::dead_letter_instance, overflow_policy::reject})
        if (to_string(p) == name) return p;
    return std::nullopt;
}

/// A sequence's buffer bound. `max_waiting` empty: default_max_waiting, and a warning names the
/// default when it is hit (the user did not choose it).
struct buffer_limit {
    std::optional<std::size_t> max_waiting{};
    overflow_policy on_overflow = overflow_policy::dead_letter_newest;

    std::size_t limit() const { return max_waiting.value_or(default_max_waiting); }
};

}  // namespace seqinbox
