#pragma once
// seqinbox run: the relay service (seqinbox/relay/relay.hpp) until SIGTERM or SIGINT.
// Exit status: 0 stopped on a signal, 1 could not start or failed (reason on stderr), 2 usage.
#include <span>
#include <string_view>

namespace seqinbox::cli {

int run_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
