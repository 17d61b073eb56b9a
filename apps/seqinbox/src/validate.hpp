#pragma once
// `seqinbox validate FILE...`: checks declaration files as the library loads them, knowing only
// the built-in names (key, header:NAME, json:/pointer) unless told to assume the others.
#include <span>
#include <string_view>

namespace seqinbox::cli {

/// The `validate` subcommand: exit 0 and a summary when every file is valid, 1 with every
/// problem on stderr otherwise, 2 on a usage error or an unreadable file.
int validate_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
