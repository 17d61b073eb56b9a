#include "seqinbox/kafka/publisher.hpp"

#include <atomic>
#include <exception>
#include <type_traits>
#include <vector>
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

struct publication_batch::state {
    std::vector<detail::awaited_delivery> deliveries;
};

publication_batch::publication_batch() : state_(std::make_unique<state>()) {}
publication_batch::~publication_batch() = default;
std::size_t publication_batch::size() const noexcept { return state_->deliveries.size(); }

class publisher::impl {
public:
    explicit impl(const publisher_options& options) : producer_(settings_of(options)) {}

    void publish(const std::string& topic, const envelope& record, std::string_view partition_key) {
        counting_failure([&] { producer_.send(outgoing_of(topic, record, partition_key)); });
        ++published_;
    }

    void publish_later(publication_batch& batch, const std::string& topic, const envelope& record, std::string_view partition_key) {
        batch.state_->deliveries.push_back(counting_failure([&] { return producer_.dispatch(outgoing_of(topic, record, partition_key)); }));
    }

    void await(publication_batch& batch) {
        auto deliveries = std::exchange(batch.state_->deliveries, {});
        std::exception_ptr first_failure;
        for (auto& d : deliveries) {
            try {
                counting_failure([&] { producer_.await(d); });
                ++published_;
            } catch (...) {
                if (!first_failure) first_failure = std::current_exception();
            }
        }
        if (first_failure) std::rethrow_exception(first_failure);
    }

    std::int32_t partitions(const std::string& topic) { return producer_.partition_count(topic); }

    publisher_statistics statistics() const { return {published_.load(), failed_.load()}; }

private:
    detail::outgoing outgoing_of(const std::string& topic, const envelope& record, std::string_view partition_key) {
        const auto partition = partition_for(partition_key, producer_.partition_count(topic));
        return {topic, partition, record.key, record.value, record.headers, describe_record(topic, record)};
    }

    template <class Step>
    std::invoke_result_t<Step> counting_failure(Step step) {
        try {
            return step();
        } catch (...) {
            ++failed_;
            throw;
        }
    }

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

void publisher::publish_later(publication_batch& batch, const std::string& topic, const envelope& record,
                              std::string_view partition_key) {
    impl_->publish_later(batch, topic, record, partition_key);
}

void publisher::await(publication_batch& batch) { impl_->await(batch); }

std::int32_t publisher::partitions(const std::string& topic) { return impl_->partitions(topic); }

publisher_statistics publisher::statistics() const { return impl_->statistics(); }

}  // namespace seqinbox::kafka
