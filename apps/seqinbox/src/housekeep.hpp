#pragma once
// seqinbox housekeep --once: one housekeeping run (docs/operations.md) against a PostgreSQL inbox, with the
// dead-letter topic as the error sink that receives every WAITING message before its instance is
// removed. Prints what each job did. Exit status: 0 done, 1 error (reason on stderr), 2 usage.
#include <span>
#include <string_view>

namespace seqinbox::cli {

int housekeep_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
