#pragma once
// `seqinbox demo`: an order sequence delivered shuffled, duplicated and concurrently through three
// in-memory service instances sharing one store, then verified (exactly once, in declared order).
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string_view>

namespace seqinbox::cli {

struct demo_options {
    std::uint64_t seed = 1;   ///< drives the shuffle, the duplicates, the failure and the scheduler
    std::size_t orders = 5;
    bool quiet = false;       ///< summary and verification only, no trace
};

/// Runs the demo, writing to `out`. Returns true when every verification passed.
/// The same options always produce the same output.
bool run_demo(const demo_options& options, std::ostream& out);

/// The `demo` subcommand: parses `args` (throws usage_error), runs, returns the exit code.
int demo_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
