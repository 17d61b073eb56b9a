#pragma once
// The order workload of the Kafka and relay tests and of bench_relay: orders of four messages,
// some sent twice, shuffled, produced to random partitions (so out of order within a context),
// or each order's to one partition, as a producer keyed by order id does (still out of order).
#include <functional>
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kafka/mock_cluster.hpp"
#include "support/world.hpp"

namespace seqinbox::testing {

/// Where the records of one order go.
enum class placement { random_partition, partition_of_context };

/// Every logical message of `contexts` orders, each once or more, shuffled.
struct order_workload {
    std::vector<envelope> records;  ///< what is produced, duplicates included
    std::size_t logical = 0;
    std::vector<std::string> contexts;

    order_workload(std::size_t context_count, double duplicate_share, std::uint64_t seed, const std::string& prefix = "order") {
        std::mt19937_64 rng(seed);
        std::vector<envelope> unique;
        for (std::size_t c = 0; c < context_count; ++c) {
            const std::string context = prefix + "-" + std::to_string(c);
            contexts.push_back(context);
            const char* fulfilment = rng() % 2 ? "OrderPrepared" : "OrderExpedited";
            for (const char* type : {"OrderCreated", "OrderValidated", fulfilment, "OrderShipped"})
                unique.push_back(record(type, type + ("@" + context), context));
        }
        logical = unique.size();
        records = unique;
        std::bernoulli_distribution duplicate(duplicate_share);
        for (const auto& e : unique)
            if (duplicate(rng)) records.push_back(e);
        std::shuffle(records.begin(), records.end(), rng);
    }

    /// Produces records [from, to) to `topic`, each on one of `partitions` partitions: a random
    /// one, or the one of its order (its key).
    void produce(mock_cluster& cluster, const std::string& topic, int partitions, std::uint64_t seed, std::size_t from = 0,
                 std::size_t to = static_cast<std::size_t>(-1), placement where = placement::random_partition) const {
        const auto partition_of = partitions_of(partitions, seed, where);
        for (std::size_t i = from; i < std::min(to, records.size()); ++i) {
            envelope e = records[i];
            e.topic = topic;
            cluster.produce_async(topic, e, partition_of(e));
        }
        cluster.flush();
    }

    /// The records of each of `partitions` partitions, in produce order, as produce() places all
    /// of them (bench_relay decides them without Kafka too).
    std::vector<std::vector<envelope>> by_partition(int partitions, std::uint64_t seed, placement where) const {
        std::vector<std::vector<envelope>> placed(static_cast<std::size_t>(partitions));
        const auto partition_of = partitions_of(partitions, seed, where);
        for (const auto& e : records) placed[static_cast<std::size_t>(partition_of(e))].push_back(e);
        return placed;
    }

private:
    /// Called once per record in produce order: that record's partition.
    static std::function<std::int32_t(const envelope&)> partitions_of(int partitions, std::uint64_t seed, placement where) {
        return [rng = std::mt19937_64(seed), count = static_cast<std::uint64_t>(partitions), where](const envelope& e) mutable {
            const std::uint64_t random = rng();
            const std::uint64_t pick = where == placement::random_partition ? random : std::hash<std::string>{}(e.key.value_or(""));
            return static_cast<std::int32_t>(pick % count);
        };
    }
};

}  // namespace seqinbox::testing
