#pragma once
// seqinbox dev-kafka: librdkafka's mock cluster (seqinbox/kafka/mock_cluster.hpp) in the
// foreground until SIGTERM or SIGINT, for trying things out and for tests.
// Exit status: 0 stopped on a signal, 1 could not start (reason on stderr), 2 usage error.
#include <span>
#include <string_view>

namespace seqinbox::cli {

int dev_kafka_command(std::span<const std::string_view> args);

}  // namespace seqinbox::cli
