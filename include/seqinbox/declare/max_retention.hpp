#pragma once
// The longest retention period or deduplication window a declaration may give (ten years): instance
// times are system_clock time points, which a much longer one would overflow.
#include <chrono>

namespace seqinbox {

inline constexpr std::chrono::seconds max_retention{10LL * 366 * 24 * 3600};

}  // namespace seqinbox
