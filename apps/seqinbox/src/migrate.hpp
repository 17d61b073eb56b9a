#pragma once
// `seqinbox migrate --postgres CONNINFO [--target N]`: brings a PostgreSQL database to the
// schema version of this build (seqinbox::postgresql::migrate).
#include <span>
#include <string_view>

namespace seqinbox::cli {

/// The `migrate` subcommand: exit 0 and what was applied, 1 when the database is refused or
/// unreachable (the reason on stderr), 2 on a usage error.
int migrate_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
