#include "seqinbox/kafka/dead_letter_sink.hpp"

#include <atomic>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "acknowledged_producer.hpp"
#include "seqinbox/detail/escaped_text.hpp"
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

/// How much of the original record a dead-letter record carries: all of it, or less when the
/// producer or the broker refuses the record for its size.
enum class carried { everything, all_but_value, failure_only };

/// The original headers (unless left out), in order, then the ones naming the failure and what
/// was left out.
std::vector<header> dead_letter_headers(const failed_delivery& f, carried parts) {
    namespace h = dead_letter_header;
    std::vector<header> headers;
    if (parts != carried::failure_only) headers = f.original.headers;
    const std::initializer_list<std::pair<std::string_view, std::string>> failure = {
        {h::reason, f.reason},
        {h::kind, std::string(to_string(f.kind))},
        {h::qualified_type, f.qualified_type},
        {h::idempotence_id, f.idempotence_id},
        {h::context_id, f.context_id},
        {h::original_topic, f.original.topic},
        {h::original_partition, std::to_string(f.original.partition)},
        {h::original_offset, std::to_string(f.original.offset)},
        {h::original_cluster, f.original.cluster},
    };
    for (const auto& [name, value] : failure) headers.push_back({std::string(name), value});
    if (parts == carried::everything) return headers;
    headers.push_back({std::string(h::omitted), parts == carried::all_but_value ? "value" : "value,key,headers"});
    headers.push_back({std::string(h::original_value_size), std::to_string(f.original.value ? f.original.value->size() : 0)});
    return headers;
}

std::string describe_record(const failed_delivery& f) {
    return "the failure of " + f.original.topic + "[" + std::to_string(f.original.partition) + "]@" +
           std::to_string(f.original.offset) + " (idempotence id '" + seqinbox::detail::loggable(f.idempotence_id) + "')";
}

}  // namespace

class dead_letter_sink::impl {
public:
    explicit impl(dead_letter_options options) : topic_(options.topic), producer_(settings_of(options)) {}

    void publish(const failed_delivery& f) {
        try {
            send_what_fits(f);
            ++published_;
        } catch (...) {
            ++failed_;
            throw;
        }
    }

    std::int32_t partitions() { return producer_.partition_count(topic_); }

    dead_letter_statistics statistics() const { return {published_.load(), failed_.load()}; }

private:
    /// A record too large to dead-letter whole must still leave its partition: retrying it
    /// unchanged would block every record behind it forever.
    void send_what_fits(const failed_delivery& f) {
        for (const auto parts : {carried::everything, carried::all_but_value}) {
            try {
                return send(f, parts);
            } catch (const detail::record_too_large&) {
                // carry less
            }
        }
        try {
            send(f, carried::failure_only);
        } catch (const detail::record_too_large& e) {
            throw error(error_category::configuration, producer_.role() + ": cannot dead-letter " + describe_record(f) +
                                                           " even without its value, key and headers: " + e.what());
        }
    }

    void send(const failed_delivery& f, carried parts) {
        const auto headers = dead_letter_headers(f, parts);
        // Empty rather than null when left out: a null value is a tombstone on a compacted topic.
        using bytes = std::optional<std::string_view>;
        const bytes key = parts == carried::failure_only ? bytes() : bytes(f.original.key);
        const bytes value = parts == carried::everything ? bytes(f.original.value) : bytes(std::string_view(""));
        producer_.send({topic_, RD_KAFKA_PARTITION_UA, key, value, headers, describe_record(f)});
    }

    std::string topic_;
    std::atomic<std::uint64_t> published_{0};
    std::atomic<std::uint64_t> failed_{0};
    detail::acknowledged_producer producer_;
};

dead_letter_sink::dead_letter_sink(dead_letter_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
dead_letter_sink::~dead_letter_sink() = default;

void dead_letter_sink::publish(const failed_delivery& f) { impl_->publish(f); }

std::int32_t dead_letter_sink::partitions() { return impl_->partitions(); }

dead_letter_statistics dead_letter_sink::statistics() const { return impl_->statistics(); }

}  // namespace seqinbox::kafka
