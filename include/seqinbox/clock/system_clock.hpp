#pragma once
#include <chrono>

#include "seqinbox/clock/concept.hpp"

namespace seqinbox::clock {

struct system_clock {
    timestamp now() const { return std::chrono::system_clock::now(); }
};

}  // namespace seqinbox::clock
