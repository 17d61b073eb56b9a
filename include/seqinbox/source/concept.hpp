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
concept message_source = requires(S& s, const envelope& e) {
    { s.poll() } -> std::same_as<std::optional<envelope>>;
    { s.acknowledge(e) } -> std::same_as<void>;
};

}  // namespace seqinbox
