#include "seqinbox/kafka/dead_letter_sink.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::kafka {

namespace {

using clock = std::chrono::steady_clock;

/// librdkafka expires messages in a scan that runs once a second: a publish() waits that much
/// longer than message.timeout.ms so that it normally sees librdkafka's own timeout report.
constexpr std::chrono::milliseconds report_grace{1000};
/// How long one rd_kafka_poll() blocks while a publish() waits for its report.
constexpr int poll_interval_ms = 5;

std::string describe_sink(const dead_letter_options& options) {
    std::string text = "dead-letter producer (topic '" + options.topic + "'";
    if (!options.cluster_name.empty()) text += " on cluster '" + options.cluster_name + "'";
    return text + ")";
}

[[noreturn]] void throw_configuration(std::string_view sink, const std::string& problem) {
    throw error(error_category::configuration, std::string(sink) + ": " + problem);
}

/// Throws when the user gave `name` a value other than the `accepted` spellings of what the sink
/// forces: silently overriding it would hide a wrong expectation.
void reject_conflict(const properties& props, const std::string& name, std::initializer_list<std::string_view> accepted,
                     std::string_view required, std::string_view sink) {
    const auto it = props.find(name);
    if (it == props.end() || std::ranges::find(accepted, it->second) != accepted.end()) return;
    throw_configuration(sink, "property '" + name + "' = '" + it->second + "' conflicts with the dead-letter sink, which needs " +
                                  std::string(required));
}

void validate(const dead_letter_options& options, std::string_view sink) {
    if (options.topic.empty()) throw_configuration(sink, "the dead-letter 'topic' is empty");
    if (detail::property_or(options.producer, "bootstrap.servers", detail::property_or(options.producer, "metadata.broker.list", ""))
            .empty())
        throw_configuration(sink, "property 'bootstrap.servers' is missing");
    if (options.delivery_timeout.count() <= 0 || options.delivery_timeout.count() > INT_MAX)
        throw_configuration(sink, "delivery_timeout = " + std::to_string(options.delivery_timeout.count()) +
                                      " ms is out of range (1 ms to INT_MAX ms)");
    const auto timeout = std::to_string(options.delivery_timeout.count());
    const auto& props = options.producer;
    reject_conflict(props, "enable.idempotence", {"true"}, "enable.idempotence=true", sink);
    reject_conflict(props, "acks", {"all", "-1"}, "acks=all", sink);
    reject_conflict(props, "request.required.acks", {"all", "-1"}, "acks=all", sink);
    for (const std::string name : {"message.timeout.ms", "delivery.timeout.ms"})
        reject_conflict(props, name, {timeout}, "it to equal dead_letter_options::delivery_timeout (" + timeout + " ms)", sink);
}

/// The user's properties plus the ones the sink's guarantee rests on.
properties producer_properties(const dead_letter_options& options) {
    properties props = options.producer;
    props["enable.idempotence"] = "true";
    props["acks"] = "all";
    props["message.timeout.ms"] = std::to_string(options.delivery_timeout.count());
    return props;
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

/// The message opaque is a number, not a pointer to publish()'s state: a report that arrives
/// after its publish() gave up then finds nothing instead of freed memory.
void* opaque_of(std::uint64_t id) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)); }
std::uint64_t id_of(void* opaque) { return reinterpret_cast<std::uintptr_t>(opaque); }

/// Delivery reports of the records whose publish() is still waiting, by record id.
class pending_reports {
public:
    std::uint64_t open() {
        const std::scoped_lock lock(mutex_);
        const auto id = ++last_id_;  // starts at 1: a null opaque never names a record
        reports_.emplace(id, std::nullopt);
        return id;
    }
    void arrive(std::uint64_t id, rd_kafka_resp_err_t err) {
        const std::scoped_lock lock(mutex_);
        if (const auto it = reports_.find(id); it != reports_.end()) it->second = err;
    }
    /// The report of `id` if it arrived (then forgotten), nothing otherwise.
    std::optional<rd_kafka_resp_err_t> take(std::uint64_t id) {
        const std::scoped_lock lock(mutex_);
        const auto it = reports_.find(id);
        if (it == reports_.end() || !it->second) return std::nullopt;
        const auto err = *it->second;
        reports_.erase(it);
        return err;
    }
    void close(std::uint64_t id) {
        const std::scoped_lock lock(mutex_);
        reports_.erase(id);
    }

private:
    std::mutex mutex_;
    std::uint64_t last_id_ = 0;
    std::unordered_map<std::uint64_t, std::optional<rd_kafka_resp_err_t>> reports_;
};

/// One record's place in pending_reports for the duration of its publish().
class pending_record {
public:
    explicit pending_record(pending_reports& reports) : reports_(reports), id_(reports.open()) {}
    ~pending_record() { reports_.close(id_); }
    pending_record(const pending_record&) = delete;
    pending_record& operator=(const pending_record&) = delete;
    std::uint64_t id() const { return id_; }

private:
    pending_reports& reports_;
    std::uint64_t id_;
};

std::string describe_record(const failed_delivery& f) {
    return "the failure of " + f.original.topic + "[" + std::to_string(f.original.partition) + "]@" +
           std::to_string(f.original.offset) + " (idempotence id '" + f.idempotence_id + "')";
}

}  // namespace

class dead_letter_sink::impl {
public:
    explicit impl(dead_letter_options options) : options_(std::move(options)), sink_(describe_sink(options_)) {
        validate(options_, sink_);
        auto conf = detail::make_conf(producer_properties(options_), sink_);
        rd_kafka_conf_set_dr_msg_cb(conf.get(), &impl::on_delivery);
        rd_kafka_conf_set_opaque(conf.get(), this);
        producer_.reset(detail::make_client(RD_KAFKA_PRODUCER, std::move(conf), sink_));
    }
    ~impl() {
        // Bounded: what is still queued belongs to publish() calls that already threw.
        rd_kafka_flush(producer_.get(), timeout_ms());
    }
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    void publish(const failed_delivery& f) {
        try {
            deliver(f);
            ++published_;
        } catch (...) {
            ++failed_;
            throw;
        }
    }

    dead_letter_statistics statistics() const { return {published_.load(), failed_.load()}; }

private:
    static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* self) {
        static_cast<impl*>(self)->reports_.arrive(id_of(message->_private), message->err);
    }

    int timeout_ms() const { return static_cast<int>(options_.delivery_timeout.count()); }

    void deliver(const failed_delivery& f) {
        const auto deadline = clock::now() + options_.delivery_timeout + report_grace;
        const pending_record record(reports_);
        produce(f, record.id(), deadline);
        await_report(f, record.id(), deadline);
    }

    void produce(const failed_delivery& f, std::uint64_t id, clock::time_point deadline) {
        auto headers = detail::to_kafka_headers(dead_letter_headers(f));
        const auto& key = f.original.key;
        const auto& value = f.original.value;
        for (;;) {
            // An empty key is sent as no key: envelopes do not tell them apart, and Kafka then
            // spreads keyless records instead of piling them on one partition.
            const auto err = rd_kafka_producev(
                producer_.get(), RD_KAFKA_V_TOPIC(options_.topic.c_str()),
                RD_KAFKA_V_KEY(key.empty() ? nullptr : key.data(), key.size()),
                RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_HEADERS(headers.get()), RD_KAFKA_V_OPAQUE(opaque_of(id)), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                headers.release();  // the message owns them now
                return;
            }
            if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || clock::now() >= deadline) fail(err, "producing " + describe_record(f));
            rd_kafka_poll(producer_.get(), poll_interval_ms);  // serving reports frees queue space
        }
    }

    void await_report(const failed_delivery& f, std::uint64_t id, clock::time_point deadline) {
        // Any waiting thread may serve any record's report; each one checks its own afterwards.
        while (clock::now() < deadline) {
            rd_kafka_poll(producer_.get(), poll_interval_ms);
            if (const auto err = reports_.take(id)) {
                if (*err != RD_KAFKA_RESP_ERR_NO_ERROR) fail(*err, "delivering " + describe_record(f));
                return;
            }
        }
        throw error(error_category::retryable, sink_ + ": no delivery report for " + describe_record(f) + " within " +
                                                   std::to_string((options_.delivery_timeout + report_grace).count()) + " ms");
    }

    /// Throws for `err`; a fatal error (the producer is unusable) carries librdkafka's cause.
    [[noreturn]] void fail(rd_kafka_resp_err_t err, const std::string& doing) const {
        if (err != RD_KAFKA_RESP_ERR__FATAL) detail::throw_error(err, sink_ + ": " + doing);
        std::array<char, 512> cause{};
        const auto fatal = rd_kafka_fatal_error(producer_.get(), cause.data(), cause.size());
        detail::throw_error(fatal, sink_ + ": " + doing + " (fatal, recreate the sink: " + cause.data() + ")");
    }

    dead_letter_options options_;
    std::string sink_;
    std::atomic<std::uint64_t> published_{0};
    std::atomic<std::uint64_t> failed_{0};
    pending_reports reports_;      // before producer_: reports may arrive until it is destroyed
    detail::client_ptr producer_;  // last: destroyed first
};

dead_letter_sink::dead_letter_sink(dead_letter_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
dead_letter_sink::~dead_letter_sink() = default;

void dead_letter_sink::publish(const failed_delivery& f) { impl_->publish(f); }

dead_letter_statistics dead_letter_sink::statistics() const { return impl_->statistics(); }

}  // namespace seqinbox::kafka
