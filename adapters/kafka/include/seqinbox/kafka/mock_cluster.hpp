#pragma once
// librdkafka's mock cluster: Kafka brokers inside this process on loopback ports, speaking the
// real protocol to any client (the source, kcat, ...) and keeping every record in memory only.
// For trying things out and for tests (`seqinbox dev-kafka`), never for production.
#include <string>

struct rd_kafka_s;               // librdkafka's rd_kafka_t
struct rd_kafka_mock_cluster_s;  // librdkafka's rd_kafka_mock_cluster_t (rdkafka_mock.h)

namespace seqinbox::kafka {

class mock_cluster {
public:
    /// Starts `brokers` brokers. Throws seqinbox::error(configuration) when librdkafka cannot.
    explicit mock_cluster(int brokers = 3);
    ~mock_cluster();
    mock_cluster(const mock_cluster&) = delete;
    mock_cluster& operator=(const mock_cluster&) = delete;

    /// The `bootstrap.servers` value for clients, e.g. "127.0.0.1:36045,127.0.0.1:41317".
    std::string bootstraps() const;

    /// Creates `topic` with `partitions` partitions. Topics never created are created with 4
    /// partitions on first use. Throws seqinbox::error naming the topic (e.g. it exists already).
    void create_topic(const std::string& topic, int partitions);

    /// For librdkafka's fault-injection API (rd_kafka_mock_*): the cluster this object owns.
    rd_kafka_mock_cluster_s* native() const noexcept { return cluster_; }

private:
    rd_kafka_s* owner_ = nullptr;  ///< the handle the cluster belongs to: created first, destroyed last
    rd_kafka_mock_cluster_s* cluster_ = nullptr;
};

}  // namespace seqinbox::kafka
