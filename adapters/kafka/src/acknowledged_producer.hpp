#pragma once
// Private to seqinbox::kafka: the idempotent producer behind the dead-letter sink and the
// publisher. send() returns only once the broker acknowledged its record, so a caller that
// acknowledges its own input afterwards never loses a record.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/properties.hpp"

namespace seqinbox::kafka::detail {

struct producer_settings {
    /// The user's properties; bootstrap.servers is required, enable.idempotence, acks and
    /// message.timeout.ms are forced (another value is a configuration error).
    properties props{};
    std::chrono::milliseconds delivery_timeout{30000};
    /// Who produces, for error messages: "dead-letter producer (topic 'dlq')".
    std::string role{};
    /// What the forced properties serve, for conflict errors: "the dead-letter sink".
    std::string purpose{};
};

/// One record to send.
struct outgoing {
    const std::string& topic;
    std::int32_t partition;  ///< RD_KAFKA_PARTITION_UA: by key
    std::optional<std::string_view> key;    ///< nullopt: no key (null), not an empty one
    std::optional<std::string_view> value;  ///< nullopt: a null value (tombstone), not an empty one
    const std::vector<header>& headers;
    std::string describe;  ///< names the record in errors: "the failure of orders[2]@17"
};

/// Thrown by send() for a record larger than the producer's message.max.bytes or the broker's
/// limit: sending it again unchanged can never succeed (category configuration).
class record_too_large : public error {
public:
    using error::error;
};

class pending_reports;

/// A record produced whose delivery report has not been awaited yet (acknowledged_producer::
/// await). Dropping it forgets the report: the record may still reach the topic.
class awaited_delivery {
public:
    awaited_delivery(awaited_delivery&& other) noexcept;
    awaited_delivery& operator=(awaited_delivery&&) = delete;
    ~awaited_delivery();

private:
    friend class acknowledged_producer;
    awaited_delivery(pending_reports& reports, std::string describe, std::chrono::steady_clock::time_point deadline);

    pending_reports* reports_;
    std::uint64_t id_;
    std::string describe_;
    std::chrono::steady_clock::time_point deadline_;
};

/// Thread safety: send(), dispatch(), await() and partition_count() may run on any number of
/// threads at once (each awaited_delivery on one thread at a time).
class acknowledged_producer {
public:
    /// Throws seqinbox::error(configuration) naming the property and value for a missing
    /// bootstrap.servers, a conflicting or unknown property, or a delivery_timeout out of range.
    explicit acknowledged_producer(producer_settings settings);
    /// Flushes for at most delivery_timeout (what is left belongs to send() calls that threw).
    ~acknowledged_producer();
    acknowledged_producer(const acknowledged_producer&) = delete;
    acknowledged_producer& operator=(const acknowledged_producer&) = delete;

    /// Produces `r` and waits for the broker's acknowledgement; throws seqinbox::error
    /// (retryable for transient conditions) when it is refused or does not come in time,
    /// record_too_large when it is refused for its size.
    void send(const outgoing& r);
    /// Produces `r` without waiting for its acknowledgement; throws as send() when it is refused
    /// at once (too large, unknown partition, queue full past the delivery timeout).
    awaited_delivery dispatch(const outgoing& r);
    /// Waits for the report of `d`; throws as send() when the record was refused or the report
    /// did not come in time.
    void await(awaited_delivery& d);

    /// The partitions of `topic`, asked once from the cluster and remembered. Throws
    /// seqinbox::error when the topic does not exist or the cluster does not answer.
    std::int32_t partition_count(const std::string& topic);

    const std::string& role() const noexcept { return settings_.role; }

private:
    static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* self);
    void produce(const outgoing& r, std::uint64_t id, std::chrono::steady_clock::time_point deadline);
    [[noreturn]] void fail(rd_kafka_resp_err_t err, const std::string& doing) const;
    std::int32_t ask_partition_count(const std::string& topic) const;

    producer_settings settings_;
    std::unique_ptr<pending_reports> reports_;  // before producer_: reports may arrive until it is destroyed
    std::mutex partitions_mutex_;
    std::map<std::string, std::int32_t> partitions_;
    client_ptr producer_;  // last: destroyed first
};

}  // namespace seqinbox::kafka::detail
