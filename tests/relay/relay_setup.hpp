#pragma once
// The relay's topics, its declarations of the order sequence (support/world.hpp's, read by
// message key) and its arguments, shared by the relay tests and bench_relay.
#include <filesystem>
#include <string>
#include <vector>

namespace seqinbox::test {

inline const std::string input = "orders";
inline const std::string output = "orders-out";
inline const std::string dead_letters = "orders-dlq";
inline constexpr int input_partitions = 4;
inline constexpr int output_partitions = 3;

inline constexpr const char* declarations_yaml = R"(sequences:
  - name: OrderSequence
    retentionPeriod: 24h
    messages:
      - { type: OrderCreated, contextIdExtractor: key }
      - { type: OrderValidated, contextIdExtractor: key, releaseCondition: { predecessor: OrderCreated } }
      - { type: OrderPrepared, contextIdExtractor: key, releaseCondition: { predecessor: OrderCreated } }
      - { type: OrderExpedited, contextIdExtractor: key, releaseCondition: { predecessor: OrderCreated } }
      - type: OrderShipped
        contextIdExtractor: key
        releaseCondition:
          and:
            - predecessor: OrderValidated
            - or: [ { predecessor: OrderPrepared }, { predecessor: OrderExpedited } ]
)";

/// `seqinbox run`'s arguments for these topics and declarations (written to `declarations`),
/// `threads` consumer threads in consumer group `group`; the jobs run at their default intervals.
inline std::vector<std::string> relay_arguments(const std::filesystem::path& declarations, const std::string& conninfo,
                                                const std::string& bootstraps, const std::string& group, int threads) {
    return {"--declarations", declarations.string(), "--postgres", conninfo, "--bootstrap-servers", bootstraps,
            "--input-topic", input, "--output-topic", "OrderSequence=" + output, "--dead-letter-topic", dead_letters,
            "--group-id", group, "--threads", std::to_string(threads), "--http-port", "0", "--consumer-property", "session.timeout.ms=6000",
            "--consumer-property", "auto.offset.reset=earliest", "--consumer-property", "log_level=0",
            "--producer-property", "log_level=0"};
}

}  // namespace seqinbox::test
