#pragma once
// The dead-letter error sink: the seqinbox::error_sink_policy on a Kafka topic, written by an
// idempotent librdkafka producer (enable.idempotence=true, acks=all).
//
// Each failed delivery becomes one record with the original key, value and headers, followed by
// the failure headers named below (an empty original key is produced as no key, since an envelope
// does not tell them apart). A record refused for its size (the producer's message.max.bytes,
// the broker's max.message.bytes) is produced again with an empty value, then also without the
// original key and headers; the header `seqinbox-omitted` says what was left out and
// `seqinbox-original-value-size` how large the value was, so the source record still leaves its
// partition. Only when even the failure headers alone are refused does publish() throw
// (configuration, naming the record). publish() returns only after the broker acknowledged that
// record; a refused record or a missing acknowledgement throws seqinbox::error (retryable for
// transient conditions such as brokers down), so the engine does not acknowledge the source
// record and nothing is lost. A record whose publish() threw may still have reached the topic:
// the dead-letter topic is at-least-once, readers deduplicate on the failure headers if needed.
//
// Timing: librdkafka's message.timeout.ms is set to delivery_timeout, and publish() throws at the
// latest about one second later (librdkafka checks message timeouts once a second).
//
// Thread safety: publish() and statistics() may be called from any number of threads at once;
// each call waits for its own record only. The destructor (not while a publish() runs) flushes for at most delivery_timeout,
// then drops what is left (those records' publish() calls have already thrown).
//
// librdkafka stays private: this header needs no librdkafka header.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "seqinbox/error_sink/concept.hpp"
#include "seqinbox/kafka/properties.hpp"

namespace seqinbox::kafka {

/// Names of the headers a dead-letter record carries besides the original ones. Numbers are
/// decimal text; an unknown value (no qualified type, no cluster name) is an empty header.
namespace dead_letter_header {
inline constexpr std::string_view reason = "seqinbox-reason";
/// The failure_kind's name (seqinbox/failure_kind.hpp), e.g. "listener_failed".
inline constexpr std::string_view kind = "seqinbox-failure-kind";
inline constexpr std::string_view qualified_type = "seqinbox-type";
inline constexpr std::string_view idempotence_id = "seqinbox-idempotence-id";
inline constexpr std::string_view context_id = "seqinbox-context-id";
inline constexpr std::string_view original_topic = "seqinbox-original-topic";
inline constexpr std::string_view original_partition = "seqinbox-original-partition";
inline constexpr std::string_view original_offset = "seqinbox-original-offset";
inline constexpr std::string_view original_cluster = "seqinbox-original-cluster";
/// Only on a record refused whole for its size: "value", or "value,key,headers".
inline constexpr std::string_view omitted = "seqinbox-omitted";
/// Only with `omitted`: the size in bytes of the original value.
inline constexpr std::string_view original_value_size = "seqinbox-original-value-size";

/// Every header the sink adds (what a redrive takes off again).
inline constexpr std::array<std::string_view, 11> all = {reason,         kind,           qualified_type,     idempotence_id,
                                                          context_id,     original_topic, original_partition, original_offset,
                                                          original_cluster, omitted,      original_value_size};
}  // namespace dead_letter_header

struct dead_letter_options {
    /// librdkafka producer properties; bootstrap.servers is required. enable.idempotence and acks
    /// are forced to true and all; message.timeout.ms (alias delivery.timeout.ms) follows
    /// delivery_timeout. Giving any of them another value is a configuration error.
    properties producer{};
    /// The dead-letter topic; records are partitioned by the original key.
    std::string topic{};
    /// How long publish() waits for the broker's acknowledgement of its record (must be > 0).
    std::chrono::milliseconds delivery_timeout{30000};
    /// Name of the cluster holding the dead-letter topic, used in error messages only.
    std::string cluster_name{};
};

/// Counters of one sink since its creation.
struct dead_letter_statistics {
    std::uint64_t published = 0;  ///< publish() calls that returned normally
    std::uint64_t failed = 0;     ///< publish() calls that threw
};

class dead_letter_sink {
public:
    /// Creates the producer (it connects in the background). Throws seqinbox::error(configuration)
    /// naming the property and value for a missing bootstrap.servers, an empty topic, a
    /// conflicting or unknown property, or a non-positive delivery_timeout.
    explicit dead_letter_sink(dead_letter_options options);
    ~dead_letter_sink();
    dead_letter_sink(const dead_letter_sink&) = delete;
    dead_letter_sink& operator=(const dead_letter_sink&) = delete;

    /// Produces `f` to the dead-letter topic (without what makes it too large, see above) and
    /// waits until the broker acknowledged it.
    void publish(const failed_delivery& f);

    /// The partition count of the dead-letter topic, asked from the cluster once. Throws
    /// seqinbox::error(configuration) naming the topic when it does not exist: call it at start.
    std::int32_t partitions();

    dead_letter_statistics statistics() const;

private:
    class impl;
    std::unique_ptr<impl> impl_;
};

static_assert(seqinbox::error_sink_policy<dead_letter_sink>);

}  // namespace seqinbox::kafka
