#include "seqinbox/kafka/dead_letter_sink.hpp"

#include <atomic>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "acknowledged_producer.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::kafka {

namespace {

std::string describe_sink(const dead_letter_options& options) {
    std::string text = "dead-letter producer (topic '" + options.topic + "'";
    if (!options.cluster_name.empty()) text += " on cluster '" + options.cluster_name + "'";
    return text + ")";
}

detail::producer_settings settings_of(const dead_letter_options& options) {
    const auto role = describe_sink(options);
    if (options.topic.empty()) throw error(error_category::configuration, role + ": the dead-letter 'topic' is empty");
    return {options.producer, options.delivery_timeout, role, "the dead-letter sink"};
}

/// The original headers, in order, then the ones naming the failure.
std::vector<header> dead_letter_headers(const failed_delivery& f) {
    namespace h = dead_letter_header;
    std::vector<header> headers = f.original.headers;
    const std::initializer_list<std::pair<std::string_view, std::string>> failure = {
        {h::reason, f.reason},
        {h::qualified_type, f.qualified_type},
        {h::idempotence_id, f.idempotence_id},
        {h::context_id, f.context_id},
        {h::original_topic, f.original.topic},
        {h::original_partition, std::to_string(f.original.partition)},
        {h::original_offset, std::to_string(f.original.offset)},
        {h::original_cluster, f.original.cluster},
    };
    for (const auto& [name, value] : failure) headers.push_back({std::string(name), value});
    return headers;
}

std::string describe_record(const failed_delivery& f) {
    return "the failure of " + f.original.topic + "[" + std::to_string(f.original.partition) + "]@" +
           std::to_string(f.original.offset) + " (idempotence id '" + f.idempotence_id + "')";
}

}  // namespace

class dead_letter_sink::impl {
public:
    explicit impl(dead_letter_options options) : topic_(options.topic), producer_(settings_of(options)) {}

    void publish(const failed_delivery& f) {
        try {
            const auto headers = dead_letter_headers(f);
            producer_.send({topic_, RD_KAFKA_PARTITION_UA, f.original.key, f.original.value, headers, describe_record(f)});
            ++published_;
        } catch (...) {
            ++failed_;
            throw;
        }
    }

    dead_letter_statistics statistics() const { return {published_.load(), failed_.load()}; }

private:
    std::string topic_;
    std::atomic<std::uint64_t> published_{0};
    std::atomic<std::uint64_t> failed_{0};
    detail::acknowledged_producer producer_;
};

dead_letter_sink::dead_letter_sink(dead_letter_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
dead_letter_sink::~dead_letter_sink() = default;

void dead_letter_sink::publish(const failed_delivery& f) { impl_->publish(f); }

dead_letter_statistics dead_letter_sink::statistics() const { return impl_->statistics(); }

}  // namespace seqinbox::kafka
