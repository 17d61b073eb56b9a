#pragma once
// The library's mock cluster (seqinbox/kafka/mock_cluster.hpp) with what tests need around it:
// a producer for test records, a reader that fetches a topic's records without a consumer group,
// committed offsets and end offsets.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "seqinbox/envelope.hpp"
#include "seqinbox/kafka/mock_cluster.hpp"
#include "seqinbox/kafka/properties.hpp"

namespace seqinbox::testing {

/// Properties every test client gets: quiet logs (broker-down tests would flood stderr) and the
/// group timings the mock needs to rebalance in seconds rather than a minute.
inline kafka::properties quiet_client(const std::string& bootstraps) {
    return {{"bootstrap.servers", bootstraps}, {"log_level", "0"}};
}

inline kafka::properties consumer_properties(const std::string& bootstraps, const std::string& group) {
    auto props = quiet_client(bootstraps);
    props.insert({{"group.id", group},
                  {"session.timeout.ms", "4000"},
                  {"heartbeat.interval.ms", "200"},
                  {"auto.offset.reset", "earliest"}});
    return props;
}

class mock_cluster {
public:
    explicit mock_cluster(int brokers = 3) : cluster_(brokers), producer_(make_producer()) {}
    mock_cluster(const mock_cluster&) = delete;
    mock_cluster& operator=(const mock_cluster&) = delete;
    ~mock_cluster() {
        rd_kafka_flush(producer_, 5000);
        rd_kafka_destroy(producer_);
    }

    std::string bootstraps() const { return cluster_.bootstraps(); }
    rd_kafka_mock_cluster_t* native() const { return cluster_.native(); }
    void create_topic(const std::string& topic, int partitions) { cluster_.create_topic(topic, partitions); }

    /// Produces one record (partition -1: by key) and waits until it is acknowledged.
    void produce(const std::string& topic, const envelope& record, std::int32_t partition = -1) {
        produce_async(topic, record, partition);
        flush();
    }

    /// Produces without waiting; call flush() before reading or consuming.
    void produce_async(const std::string& topic, const envelope& record, std::int32_t partition = -1) {
        rd_kafka_headers_t* headers = rd_kafka_headers_new(record.headers.size());
        for (const auto& h : record.headers)
            rd_kafka_header_add(headers, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                                static_cast<ssize_t>(h.value.size()));
        rd_kafka_resp_err_t err;
        do {
            err = rd_kafka_producev(producer_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
                                    RD_KAFKA_V_KEY(bytes_of(record.key), size_of(record.key)),
                                    RD_KAFKA_V_VALUE(const_cast<char*>(bytes_of(record.value)), size_of(record.value)),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) rd_kafka_poll(producer_, 10);
        } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_headers_destroy(headers);
            throw std::runtime_error(std::string("produce: ") + rd_kafka_err2str(err));
        }
    }

    void flush() {
        if (rd_kafka_flush(producer_, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR)
            throw std::runtime_error("mock producer: flush timed out");
        if (failed_deliveries_ > 0) throw std::runtime_error("mock producer: a record was not delivered");
    }

    /// Every record of `topic` (all `partitions`), read by assignment from the beginning until
    /// `expected` arrived or `patience` passed.
    std::vector<envelope> read_all(const std::string& topic, int partitions, std::size_t expected,
                                   std::chrono::milliseconds patience = std::chrono::seconds(20)) const {
        rd_kafka_t* reader = make_reader("seqinbox-test-reader");
        rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
        for (int p = 0; p < partitions; ++p)
            rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(reader, list);
        rd_kafka_topic_partition_list_destroy(list);
        std::vector<envelope> records;
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (records.size() < expected && std::chrono::steady_clock::now() < deadline) {
            rd_kafka_message_t* m = rd_kafka_consumer_poll(reader, 100);
            if (!m) continue;
            if (!m->err) records.push_back(to_envelope(*m));
            rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(reader);
        rd_kafka_destroy(reader);
        return records;
    }

    /// Every record of `topic` once whoever wrote to it has stopped (its producers flushed or
    /// exited): as many as its end offsets count, read without waiting for one more. This is
    /// how a test shows that nothing else arrived, without waiting out a timeout: once the
    /// writers are gone the end offsets are final, so a record beyond the expected ones is
    /// counted here (and read, making the caller's size check fail), however late it was written.
    std::vector<envelope> read_written(const std::string& topic, int partitions,
                                       std::chrono::milliseconds patience = std::chrono::seconds(20)) const {
        std::size_t written = 0;
        for (const auto end : end_offsets(topic, partitions)) {
            if (end < 0) throw std::runtime_error("read_written(): no end offset of " + topic);
            written += static_cast<std::size_t>(end);
        }
        return read_all(topic, partitions, written, patience);
    }

    /// The offsets `group` committed for partitions 0..partitions-1 of `topic` (-1001: none).
    std::vector<std::int64_t> committed(const std::string& group, const std::string& topic, int partitions) const {
        rd_kafka_t* reader = make_reader(group);
        rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
        for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
        const rd_kafka_resp_err_t err = rd_kafka_committed(reader, list, 10000);
        std::vector<std::int64_t> offsets;
        for (int p = 0; p < partitions; ++p) offsets.push_back(list->elems[p].offset);
        rd_kafka_topic_partition_list_destroy(list);
        rd_kafka_destroy(reader);
        if (err) throw std::runtime_error(std::string("committed(): ") + rd_kafka_err2str(err));
        return offsets;
    }

    /// The end offset (high watermark) of each partition 0..partitions-1 of `topic`.
    std::vector<std::int64_t> end_offsets(const std::string& topic, int partitions) const {
        rd_kafka_t* reader = make_reader("seqinbox-test-watermarks");
        std::vector<std::int64_t> offsets;
        for (int p = 0; p < partitions; ++p) {
            std::int64_t low = 0, high = 0;
            if (rd_kafka_query_watermark_offsets(reader, topic.c_str(), p, &low, &high, 10000)) high = -1;
            offsets.push_back(high);
        }
        rd_kafka_destroy(reader);
        return offsets;
    }

    /// A record read by a reader (below).
    static envelope to_envelope(const rd_kafka_message_t& m) {
        envelope e;
        if (m.key) e.key.emplace(static_cast<const char*>(m.key), m.key_len);
        if (m.payload) e.value.emplace(static_cast<const char*>(m.payload), m.len);
        e.topic = rd_kafka_topic_name(m.rkt);
        e.partition = m.partition;
        e.offset = m.offset;
        rd_kafka_headers_t* headers = nullptr;
        if (rd_kafka_message_headers(&m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            const char* name;
            const void* value;
            size_t size;
            for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
                e.headers.push_back({name, value ? std::string(static_cast<const char*>(value), size) : std::string()});
        }
        return e;
    }

    /// A consumer of `group` that never subscribes (reads by assignment, never commits), with
    /// `extra` properties; rd_kafka_destroy() it.
    rd_kafka_t* make_reader(const std::string& group, const kafka::properties& extra = {}) const {
        rd_kafka_conf_t* conf = rd_kafka_conf_new();
        char reason[256];
        auto props = quiet_client(bootstraps());
        props.insert(extra.begin(), extra.end());
        for (const auto& [k, v] : props) rd_kafka_conf_set(conf, k.c_str(), v.c_str(), reason, sizeof reason);
        rd_kafka_conf_set(conf, "group.id", group.c_str(), reason, sizeof reason);
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", reason, sizeof reason);
        rd_kafka_t* reader = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof reason);
        if (!reader) throw std::runtime_error(std::string("mock reader: ") + reason);
        rd_kafka_poll_set_consumer(reader);
        return reader;
    }

private:
    /// A key or value for librdkafka: a null pointer is Kafka's null.
    static const char* bytes_of(const std::optional<std::string>& bytes) { return bytes ? bytes->data() : nullptr; }
    static std::size_t size_of(const std::optional<std::string>& bytes) { return bytes ? bytes->size() : 0; }

    static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* self) {
        if (m->err) ++static_cast<mock_cluster*>(self)->failed_deliveries_;
    }

    rd_kafka_t* make_producer() {
        rd_kafka_conf_t* conf = rd_kafka_conf_new();
        char reason[256];
        for (const auto& [k, v] : quiet_client(bootstraps())) rd_kafka_conf_set(conf, k.c_str(), v.c_str(), reason, sizeof reason);
        rd_kafka_conf_set(conf, "linger.ms", "5", reason, sizeof reason);
        // Input records above the 1,000,000 bytes a client refuses by default (the mock broker
        // has no limit of its own), so tests can hand the relay records it cannot publish as they are.
        rd_kafka_conf_set(conf, "message.max.bytes", "4000000", reason, sizeof reason);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_conf_set_opaque(conf, this);
        rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
        if (!producer) throw std::runtime_error(std::string("mock producer: ") + reason);
        return producer;
    }

    kafka::mock_cluster cluster_;  // outlives the producer
    rd_kafka_t* producer_ = nullptr;
    int failed_deliveries_ = 0;
};

}  // namespace seqinbox::testing
