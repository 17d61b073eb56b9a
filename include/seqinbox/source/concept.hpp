#pragma once
// The message source policy: where deliveries come from and where acknowledgements go.
#include <concepts>
#include <optional>

#include "seqinbox/envelope.hpp"

namespace seqinbox {

/// `poll()` returns the next delivery or nothing when none is ready now.
/// `acknowledge(e)` is called once the inbox decision for `e` is durable; a delivery that is
/// never acknowledged must be delivered again (at-least-once).
template <class S>
concept source_policy = requires(S& s, const envelope& e) {
    { s.poll() } -> std::same_as<std::optional<envelope>>;
    { s.acknowledge(e) } -> std::same_as<void>;
};

/// A source that can take a delivery back: `redeliver(e)` is called instead of acknowledge(e)
/// when no durable decision was reached for `e` (the inbox threw), so that `e` comes again
/// without waiting for a restart (a Kafka consumer seeks back to it).
template <class S>
concept redelivering_source = source_policy<S> && requires(S& s, const envelope& e) {
    { s.redeliver(e) } -> std::same_as<void>;
};

}  // namespace seqinbox
