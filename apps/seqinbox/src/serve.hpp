#pragma once
// seqinbox serve: the operator API and web console (seqinbox/relay/operator_api.hpp) of an inbox
// database until SIGTERM or SIGINT, for services that embed the library.
// Exit status: 0 stopped on a signal, 1 could not start (reason on stderr), 2 usage.
#include <span>
#include <string_view>

namespace seqinbox::cli {

int serve_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
