#pragma once
// The operator subcommands on a PostgreSQL inbox (docs/operations.md): read views and pending actions.
//   seqinbox status     --postgres CONNINFO [--json]
//   seqinbox sequences  --postgres CONNINFO (--expired | --expiring [--share S]) [--limit N] [--json]
//   seqinbox show       --postgres CONNINFO SEQUENCE CONTEXT_ID [--json]
//   seqinbox consume | expire           MESSAGE_ID  --postgres CONNINFO
//   seqinbox consume-all | close        INSTANCE_ID --postgres CONNINFO
// Actions are written as pending actions; the service's pending-action job executes them.
// Exit status: 0 done, 1 not found / refused / unreachable (reason on stderr), 2 usage error.
#include <span>
#include <string_view>

namespace seqinbox::cli {

int status_command(std::span<const std::string_view> args);
int sequences_command(std::span<const std::string_view> args);
int show_command(std::span<const std::string_view> args);
int consume_command(std::span<const std::string_view> args);
int expire_command(std::span<const std::string_view> args);
int consume_all_command(std::span<const std::string_view> args);
int close_command(std::span<const std::string_view> args);
int skip_gap_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
