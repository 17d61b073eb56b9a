#pragma once
// The strategy with the claim step taken out of the flow (`--claim no_claim`): every delivery
// "wins" and nothing is written. It exists to show that the simulator's checks fail without the
// claim, and it is the library's legacy check_then_insert: the key's rows are read before the
// instance lock, as the engine before the claim did. Read under the lock, they serialise
// duplicates of one context on their own (found in issue 17), and the checks could only catch the
// missing claim through a lock on an instance a crash removed.
#include "seqinbox/claim/check_then_insert.hpp"

namespace seqinbox::sim {

using no_claim = claim::check_then_insert;

}  // namespace seqinbox::sim
