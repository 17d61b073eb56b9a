// seqinbox::kafka::redrive: a consumer without a group reads the ledger and the dead-letter
// topic to the ends they had at the start; an acknowledged producer copies and records.
#include "seqinbox/kafka/redrive.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "acknowledged_producer.hpp"
#include "client.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"

namespace seqinbox::kafka {

namespace {

using namespace std::chrono;

struct topic_deleter {
    void operator()(rd_kafka_topic_t* t) const noexcept { rd_kafka_topic_destroy(t); }
};
struct metadata_deleter {
    void operator()(const rd_kafka_metadata_t* m) const noexcept { rd_kafka_metadata_destroy(m); }
};

int milliseconds_of(milliseconds d) { return static_cast<int>(std::min<milliseconds::rep>(d.count(), 1'000'000'000)); }

/// The records of one topic from its beginning to the end it had when read_all began, every
/// partition, in offset order per partition. Reads without a consumer group and commits nothing.
class topic_reader {
public:
    topic_reader(const properties& props, std::string topic, milliseconds timeout)
        : topic_(std::move(topic)), timeout_(timeout), role_("redrive consumer (topic '" + topic_ + "')") {
        auto conf = detail::make_conf(props, role_);
        detail::set_property(*conf, "group.id", detail::property_or(props, "group.id", "seqinbox-redrive"), role_);
        detail::set_property(*conf, "enable.auto.commit", "false", role_);
        detail::set_property(*conf, "enable.auto.offset.store", "false", role_);
        client_.reset(detail::make_client(RD_KAFKA_CONSUMER, std::move(conf), role_));
    }
    ~topic_reader() { rd_kafka_consumer_close(client_.get()); }
    topic_reader(const topic_reader&) = delete;
    topic_reader& operator=(const topic_reader&) = delete;

    /// Whether the topic exists (the cluster answers for it).
    bool exists() { return partition_count() > 0; }

    template <class Visit>
    void read_all(Visit visit) {
        std::map<std::int32_t, std::int64_t> ends = assign_to_ends();
        while (!ends.empty()) {
            const detail::message_ptr message(rd_kafka_consumer_poll(client_.get(), milliseconds_of(timeout_)));
            if (!message) throw error(error_category::retryable, role_ + ": no record within " + std::to_string(timeout_.count()) + " ms");
            if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
            if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) detail::throw_error(message->err, role_ + ": reading");
            auto end = ends.find(message->partition);
            if (end == ends.end() || message->offset >= end->second) continue;
            visit(to_envelope(*message));
            if (message->offset + 1 >= end->second) ends.erase(end);
        }
    }

private:
    int partition_count() {
        const std::unique_ptr<rd_kafka_topic_t, topic_deleter> handle(rd_kafka_topic_new(client_.get(), topic_.c_str(), nullptr));
        const rd_kafka_metadata_t* raw = nullptr;
        const auto err = rd_kafka_metadata(client_.get(), 0, handle.get(), &raw, milliseconds_of(timeout_));
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) detail::throw_error(err, role_ + ": asking for the topic's partitions");
        const std::unique_ptr<const rd_kafka_metadata_t, metadata_deleter> metadata(raw);
        if (metadata->topic_cnt != 1 || metadata->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
        return metadata->topics[0].partition_cnt;
    }

    /// Assigns every partition that has records at its low watermark; their high watermarks.
    std::map<std::int32_t, std::int64_t> assign_to_ends() {
        const int partitions = partition_count();
        if (partitions == 0) throw error(error_category::configuration, role_ + ": topic '" + topic_ + "' does not exist");
        std::map<std::int32_t, std::int64_t> ends;
        const detail::partition_list_ptr assignment(rd_kafka_topic_partition_list_new(partitions));
        for (std::int32_t p = 0; p < partitions; ++p) {
            std::int64_t low = 0, high = 0;
            const auto err = rd_kafka_query_watermark_offsets(client_.get(), topic_.c_str(), p, &low, &high, milliseconds_of(timeout_));
            if (err != RD_KAFKA_RESP_ERR_NO_ERROR) detail::throw_error(err, role_ + ": asking for the ends of partition " + std::to_string(p));
            if (high <= low) continue;
            rd_kafka_topic_partition_list_add(assignment.get(), topic_.c_str(), p)->offset = low;
            ends.emplace(p, high);
        }
        if (ends.empty()) return ends;
        if (const auto err = rd_kafka_assign(client_.get(), assignment.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
            detail::throw_error(err, role_ + ": assigning its partitions");
        return ends;
    }

    envelope to_envelope(const rd_kafka_message_t& m) const {
        envelope e;
        if (m.key != nullptr) e.key = std::string(static_cast<const char*>(m.key), m.key_len);
        if (m.payload != nullptr) e.value = std::string(static_cast<const char*>(m.payload), m.len);
        e.headers = detail::headers_of(m);
        e.topic = topic_;
        e.partition = m.partition;
        e.offset = m.offset;
        rd_kafka_timestamp_type_t type{};
        const auto ms = rd_kafka_message_timestamp(&m, &type);
        if (ms >= 0) e.time = timestamp(std::chrono::milliseconds(ms));
        return e;
    }

    std::string topic_;
    milliseconds timeout_;
    std::string role_;
    detail::client_ptr client_;
};

std::string ledger_key(const envelope& dead_letter) {
    return dead_letter.topic + ":" + std::to_string(dead_letter.partition) + ":" + std::to_string(dead_letter.offset);
}

bool is_failure_header(std::string_view name) {
    return std::ranges::find(dead_letter_header::all, name) != dead_letter_header::all.end();
}

std::string header_or_empty(const envelope& e, std::string_view name) { return std::string(e.find_header(name).value_or("")); }

bool selected(const envelope& dead_letter, const redrive_selection& select) {
    if (select.kind && header_or_empty(dead_letter, dead_letter_header::kind) != to_string(*select.kind)) return false;
    if (select.type && header_or_empty(dead_letter, dead_letter_header::qualified_type) != *select.type) return false;
    return !select.since || dead_letter.time >= *select.since;
}

/// Copies dead letters and records each copy.
class copier {
public:
    explicit copier(const redrive_options& options)
        : options_(options), ledger_(ledger_topic_of(options)),
          producer_({options.client, options.timeout, "redrive producer (topic '" + options.to + "')", "the redrive"}) {
        target_partitions_ = producer_.partition_count(options_.to);  // both must exist before the first copy
        producer_.partition_count(ledger_);
    }

    void copy(const envelope& dead_letter) {
        std::vector<header> headers;
        for (const auto& h : dead_letter.headers)
            if (!is_failure_header(h.name)) headers.push_back(h);
        using bytes = std::optional<std::string_view>;
        const bytes key = dead_letter.key ? bytes(*dead_letter.key) : bytes();
        const bytes value = dead_letter.value ? bytes(*dead_letter.value) : bytes();
        producer_.send({options_.to, partition_for(dead_letter), key, value, headers, "the copy of " + ledger_key(dead_letter)});
        const std::string entry = ledger_key(dead_letter);
        const std::vector<header> none;
        producer_.send({ledger_, RD_KAFKA_PARTITION_UA, bytes(entry), bytes(options_.to), none, "the ledger entry of " + entry});
    }

private:
    /// Back to its original partition when it goes back to its original topic, so that it keeps
    /// its context's partition; else by key.
    std::int32_t partition_for(const envelope& dead_letter) const {
        if (header_or_empty(dead_letter, dead_letter_header::original_topic) != options_.to) return RD_KAFKA_PARTITION_UA;
        const auto text = header_or_empty(dead_letter, dead_letter_header::original_partition);
        std::int32_t partition = -1;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), partition);
        const bool valid = ec == std::errc{} && end == text.data() + text.size() && partition >= 0 && partition < target_partitions_;
        return valid ? partition : RD_KAFKA_PARTITION_UA;
    }

    const redrive_options& options_;
    std::string ledger_;
    detail::acknowledged_producer producer_;
    std::int32_t target_partitions_ = 0;
};

/// The dead letters an earlier run copied, by ledger_key.
std::set<std::string> copied_before(const redrive_options& options) {
    topic_reader ledger(options.client, ledger_topic_of(options), options.timeout);
    std::set<std::string> copied;
    if (options.dry_run && !ledger.exists()) return copied;  // nothing recorded yet
    ledger.read_all([&](const envelope& entry) {
        if (entry.key) copied.insert(*entry.key);
    });
    return copied;
}

void require(bool given, std::string_view what) {
    if (!given) throw error(error_category::configuration, "redrive: " + std::string(what) + " is required");
}

}  // namespace

std::string ledger_topic_of(const redrive_options& options) { return options.ledger.empty() ? options.from + ".redriven" : options.ledger; }

redrive_report redrive(const redrive_options& options) {
    require(!options.from.empty(), "the dead-letter topic");
    require(!options.to.empty(), "the target topic");
    if (options.from == options.to) throw error(error_category::configuration, "redrive: the target topic is the dead-letter topic '" + options.from + "'");
    const std::set<std::string> copied = copied_before(options);
    std::optional<copier> copies;
    if (!options.dry_run) copies.emplace(options);
    redrive_report report;
    topic_reader(options.client, options.from, options.timeout).read_all([&](const envelope& dead_letter) {
        ++report.read;
        if (!selected(dead_letter, options.select)) return;
        ++report.selected;
        if (copied.contains(ledger_key(dead_letter))) return void(++report.already_copied);
        if (dead_letter.find_header(dead_letter_header::omitted)) return void(++report.omitted);
        if (copies) copies->copy(dead_letter);
        ++report.copied;
        ++report.copied_by_kind[header_or_empty(dead_letter, dead_letter_header::kind)];
    });
    return report;
}

}  // namespace seqinbox::kafka
