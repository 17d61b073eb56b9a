#pragma once
// `seqinbox redrive`: dead letters copied back to an input topic (seqinbox/kafka/redrive.hpp).
#include <span>
#include <string_view>

namespace seqinbox::cli {

int redrive_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
