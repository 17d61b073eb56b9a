#pragma once
// The publisher: forwards records to Kafka topics through an idempotent librdkafka producer
// (enable.idempotence=true, acks=all), keeping each record's key, value and headers. It is what
// the relay's listeners call, so publish() returns only once the broker acknowledged the record:
// the inbox then records the message as handled, and a publish() that throws fails the delivery.
//
// Order: records given the same partition key go to the same partition, in publish() order, so a
// consumer of the topic sees one business context in the order the inbox released it. The
// partition is FNV-1a(partition key) modulo the topic's partition count (asked once per topic),
// not librdkafka's key partitioner: the original key need not be the context id.
//
// Batches: publish_later() produces without waiting and await() waits for the acknowledgements
// of a whole publication_batch at once, so that a batch of records costs one round trip instead
// of one per record (the relay's listeners produce this way while the inbox decides a batch).
//
// Thread safety: publish(), publish_later(), await() and statistics() may be called from any
// number of threads at once; a publication_batch is used by one thread at a time.
// The destructor (not while a publish() runs) flushes for at most delivery_timeout.
//
// librdkafka stays private: this header needs no librdkafka header.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/kafka/properties.hpp"

namespace seqinbox::kafka {

struct publisher_options {
    /// librdkafka producer properties; bootstrap.servers is required. enable.idempotence, acks
    /// and message.timeout.ms are forced as for the dead-letter sink (another value is an error).
    properties producer{};
    /// How long publish() waits for the broker's acknowledgement (must be > 0).
    std::chrono::milliseconds delivery_timeout{30000};
    /// Name of the cluster, used in error messages only.
    std::string cluster_name{};
};

struct publisher_statistics {
    std::uint64_t published = 0;  ///< records acknowledged by the broker
    std::uint64_t failed = 0;     ///< records refused or not acknowledged in time
};

/// Records produced by publisher::publish_later() whose acknowledgements publisher::await()
/// awaits together. Dropped unawaited, its records may or may not reach their topic.
class publication_batch {
public:
    publication_batch();
    ~publication_batch();
    publication_batch(const publication_batch&) = delete;
    publication_batch& operator=(const publication_batch&) = delete;

    /// Records produced and not awaited yet.
    std::size_t size() const noexcept;

private:
    friend class publisher;
    struct state;
    std::unique_ptr<state> state_;
};

/// The partition `partition_key` maps to among `partitions` (> 0): FNV-1a 32-bit, modulo.
std::int32_t partition_for(std::string_view partition_key, std::int32_t partitions) noexcept;

class publisher {
public:
    /// Creates the producer (it connects in the background). Throws seqinbox::error(configuration)
    /// naming the property and value for bad configuration.
    explicit publisher(publisher_options options);
    ~publisher();
    publisher(const publisher&) = delete;
    publisher& operator=(const publisher&) = delete;

    /// Produces `record`'s key, value and headers to `topic` on the partition of `partition_key`
    /// and waits for the acknowledgement. Throws seqinbox::error: configuration when the topic
    /// does not exist, retryable for transient conditions (brokers down, no report in time).
    void publish(const std::string& topic, const envelope& record, std::string_view partition_key);

    /// Produces like publish() without waiting for the acknowledgement, which await(batch)
    /// waits for. Throws like publish() when the record is refused at once (too large).
    void publish_later(publication_batch& batch, const std::string& topic, const envelope& record, std::string_view partition_key);
    /// Waits for the acknowledgement of every record of `batch` and empties it. Throws
    /// seqinbox::error naming the first record refused or not acknowledged in time (the others'
    /// reports are awaited first).
    void await(publication_batch& batch);

    /// The partition count of `topic`, asked from the cluster once. Throws seqinbox::error
    /// (configuration) when the topic does not exist: call it at start to fail early.
    std::int32_t partitions(const std::string& topic);

    publisher_statistics statistics() const;

private:
    class impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace seqinbox::kafka
