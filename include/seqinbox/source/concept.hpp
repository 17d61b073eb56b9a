#pragma once
// The message source policy: where deliveries come from and where acknowledgements go.
#include <concepts>
#include <cstddef>
#include <optional>
#include <vector>

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

/// A source that hands out what it already has in one call: `poll_batch(max)` returns up to
/// `max` deliveries in delivery order, waiting no longer than the source's configured linger
/// for more once it has one, and nothing when none is ready. Each is acknowledged (or
/// redelivered) as poll() results are.
template <class S>
concept batch_source = source_policy<S> && requires(S& s, std::size_t max) {
    { s.poll_batch(max) } -> std::same_as<std::vector<envelope>>;
};

}  // namespace seqinbox
