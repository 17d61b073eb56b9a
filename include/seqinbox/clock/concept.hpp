#pragma once
#include <concepts>

#include "seqinbox/envelope.hpp"

namespace seqinbox {

/// The clock policy: the only source of "now" for the engine (creation times, retention).
template <class C>
concept clock_policy = requires(C& c) {
    { c.now() } -> std::same_as<timestamp>;
};

}  // namespace seqinbox
