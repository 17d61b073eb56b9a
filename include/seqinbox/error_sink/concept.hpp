#pragma once
// The error sink policy: where failed, undecodable and expired deliveries go.
#include <concepts>
#include <string>

#include "seqinbox/envelope.hpp"
#include "seqinbox/failure_kind.hpp"

namespace seqinbox {

/// A delivery the inbox gives up on, with the reason and what it knew about it.
struct failed_delivery {
    envelope original;
    std::string reason;
    std::string qualified_type;  ///< empty when the type could not be resolved
    std::string idempotence_id;
    std::string context_id;
    failure_kind kind = failure_kind::listener_failed;
};

/// `publish(f)` returns only once `f` is durable in the sink; it throws otherwise, and then the
/// delivery is not acknowledged (nothing is lost).
template <class S>
concept error_sink_policy = requires(S& s, const failed_delivery& f) {
    { s.publish(f) } -> std::same_as<void>;
};

}  // namespace seqinbox
