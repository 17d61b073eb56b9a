#include "seqinbox/kafka/publisher.hpp"

#include <atomic>
#include <utility>

#include "acknowledged_producer.hpp"

namespace seqinbox::kafka {

std::int32_t partition_for(std::string_view partition_key, std::int32_t partitions) noexcept {
    std::uint32_t hash = 2166136261u;
    for (const char c : partition_key) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619u;
    }
    return static_cast<std::int32_t>(hash % static_cast<std::uint32_t>(partitions));
}

namespace {

detail::producer_settings settings_of(const publisher_options& options) {
    std::string role = "publisher";
    if (!options.cluster_name.empty()) role += " (cluster '" + options.cluster_name + "')";
    return {options.producer, options.delivery_timeout, role, "the publisher"};
}

std::string describe_record(const std::string& topic, const envelope& record) {
    return "a record to '" + topic + "' from " + record.topic + "[" + std::to_string(record.partition) + "]@" +
           std::to_string(record.offset);
}

}  // namespace

class publisher::impl {
public:
    explicit impl(const publisher_options& options) : producer_(settings_of(options)) {}

    void publish(const std::string& topic, const envelope& record, std::string_view partition_key) {
        try {
            const auto partition = partition_for(partition_key, producer_.partition_count(topic));
            producer_.send({topic, partition, record.key, record.value, record.headers, describe_record(topic, record)});
            ++published_;
        } catch (...) {
            ++failed_;
            throw;
        }
    }

    std::int32_t partitions(const std::string& topic) { return producer_.partition_count(topic); }

    publisher_statistics statistics() const { return {published_.load(), failed_.load()}; }

private:
    std::atomic<std::uint64_t> published_{0};
    std::atomic<std::uint64_t> failed_{0};
    detail::acknowledged_producer producer_;
};

publisher::publisher(publisher_options options) : impl_(std::make_unique<impl>(options)) {}
publisher::~publisher() = default;

void publisher::publish(const std::string& topic, const envelope& record, std::string_view partition_key) {
    impl_->publish(topic, record, partition_key);
}

std::int32_t publisher::partitions(const std::string& topic) { return impl_->partitions(topic); }

publisher_statistics publisher::statistics() const { return impl_->statistics(); }

}  // namespace seqinbox::kafka
