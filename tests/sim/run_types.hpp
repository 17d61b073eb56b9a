#pragma once
// What one run of the simulation takes and gives, apart from the simulation itself.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/store/model.hpp"
#include "steps.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

/// Named counters; the program prints them as `name value` lines.
using tally = std::map<std::string, std::uint64_t>;

/// A claim strategy that writes claim rows; the others are exempt from the live-claim check.
template <class Claim>
inline constexpr bool writes_claims = std::is_same_v<Claim, claim::insert_first>;

struct run_options {
    std::size_t max_steps = 20'000;
    bool trace = false;                  ///< describe every step (for printing a failing run)
    std::set<std::size_t> dropped;       ///< planned deliveries left out (shrinking)
};

struct run_result {
    std::vector<step> steps;             ///< the steps applied, in order: the replayable script
    std::vector<violation> violations;
    std::vector<std::string> trace;      ///< one line per step when run_options::trace
    std::vector<std::optional<claim_key>> subjects;  ///< per step, with trace: the message it works on
    tally counts;
};

/// How many operation steps of each kind one run may take, so that every run ends.
struct operation_limits {
    std::size_t requests = 6;
    std::size_t action_runs = 6;
    std::size_t housekeeping_runs = 4;
    std::size_t time_jumps = 3;
    std::size_t crashes = 2;
    std::size_t lock_faults = 3;
    std::size_t gap_runs = 6;    ///< numbered seeds: gap-timeout job runs
    std::size_t gap_jumps = 4;   ///< numbered seeds: clock jumps by the gap timeout
};

}  // namespace seqinbox::sim
