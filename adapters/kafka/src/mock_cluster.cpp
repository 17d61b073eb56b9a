#include "seqinbox/kafka/mock_cluster.hpp"

#include "client.hpp"  // rdkafka.h, which rdkafka_mock.h needs first

#include <librdkafka/rdkafka_mock.h>

#include "seqinbox/error.hpp"

namespace seqinbox::kafka {

mock_cluster::mock_cluster(int brokers) {
    // A dedicated owner with no brokers of its own: the cluster (and its committed offsets) then
    // outlives every client that connects to it.
    owner_ = detail::make_client(RD_KAFKA_PRODUCER, detail::make_conf({{"log_level", "0"}}, "mock cluster owner"),
                                 "mock cluster owner");
    cluster_ = rd_kafka_mock_cluster_new(owner_, brokers);
    if (!cluster_) {
        rd_kafka_destroy(owner_);
        throw error(error_category::configuration, "cannot start a mock cluster of " + std::to_string(brokers) + " brokers");
    }
}

mock_cluster::~mock_cluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(owner_);  // last: destroying it while its cluster exists aborts the process
}

std::string mock_cluster::bootstraps() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }

void mock_cluster::create_topic(const std::string& topic, int partitions) {
    const rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) detail::throw_error(err, "creating mock topic '" + topic + "'");
}

}  // namespace seqinbox::kafka
