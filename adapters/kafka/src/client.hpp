#pragma once
// Private to seqinbox::kafka: what the consumer and the producer share — owning handles, building
// a librdkafka configuration from properties, turning librdkafka errors into seqinbox::error,
// and copying headers between records and envelopes.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "seqinbox/envelope.hpp"
#include "seqinbox/kafka/properties.hpp"

namespace seqinbox::kafka::detail {

struct client_deleter {
    void operator()(rd_kafka_t* client) const noexcept { rd_kafka_destroy(client); }
};
struct conf_deleter {
    void operator()(rd_kafka_conf_t* conf) const noexcept { rd_kafka_conf_destroy(conf); }
};
struct partition_list_deleter {
    void operator()(rd_kafka_topic_partition_list_t* list) const noexcept { rd_kafka_topic_partition_list_destroy(list); }
};
struct message_deleter {
    void operator()(rd_kafka_message_t* message) const noexcept { rd_kafka_message_destroy(message); }
};
struct headers_deleter {
    void operator()(rd_kafka_headers_t* headers) const noexcept { rd_kafka_headers_destroy(headers); }
};
/// Destroys only: a consumer is closed and a producer flushed by its owner before.
using client_ptr = std::unique_ptr<rd_kafka_t, client_deleter>;
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;
using partition_list_ptr = std::unique_ptr<rd_kafka_topic_partition_list_t, partition_list_deleter>;
using message_ptr = std::unique_ptr<rd_kafka_message_t, message_deleter>;
using headers_ptr = std::unique_ptr<rd_kafka_headers_t, headers_deleter>;

/// A configuration holding `props`, set one by one. Throws seqinbox::error(configuration) naming
/// the property, its value and librdkafka's reason; `role` says whose ("dead-letter producer").
conf_ptr make_conf(const properties& props, std::string_view role);

/// Sets one property of `conf`, with the same error as make_conf.
void set_property(rd_kafka_conf_t& conf, const std::string& name, const std::string& value, std::string_view role);

/// The value of `name` in `props`, or `fallback` when absent.
std::string property_or(const properties& props, const std::string& name, std::string_view fallback);

/// Creates a client of `type` that takes ownership of `conf` (also on failure).
/// Throws seqinbox::error(configuration) with librdkafka's reason.
rd_kafka_t* make_client(rd_kafka_type_t type, conf_ptr conf, std::string_view role);

/// What failed and librdkafka's name and text for `err`: "doing: NAME (text)".
std::string error_text(rd_kafka_resp_err_t err, std::string_view doing);

/// Throws seqinbox::error for `err`: retryable for transient conditions (timeouts, brokers down,
/// queue full), configuration for everything else. `doing` says what failed.
[[noreturn]] void throw_error(rd_kafka_resp_err_t err, std::string_view doing);

/// The record's headers as envelope headers, in order (a header without value becomes "").
std::vector<header> headers_of(const rd_kafka_message_t& message);

/// `headers` as a librdkafka header list (the caller owns it until it is handed to a producer).
headers_ptr to_kafka_headers(const std::vector<header>& headers);

}  // namespace seqinbox::kafka::detail
