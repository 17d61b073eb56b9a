#include "acknowledged_producer.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <optional>
#include <unordered_map>
#include <utility>

#include "seqinbox/error.hpp"

namespace seqinbox::kafka::detail {

namespace {

using clock = std::chrono::steady_clock;

/// librdkafka expires messages in a scan that runs once a second: a send() waits that much
/// longer than message.timeout.ms so that it normally sees librdkafka's own timeout report.
constexpr std::chrono::milliseconds report_grace{1000};
/// How long one rd_kafka_poll() blocks while a send() waits for its report.
constexpr int poll_interval_ms = 5;

[[noreturn]] void throw_configuration(const producer_settings& s, const std::string& problem) {
    throw error(error_category::configuration, s.role + ": " + problem);
}

/// Throws when the user gave `name` a value other than the `accepted` spellings of what the
/// producer forces: silently overriding it would hide a wrong expectation.
void reject_conflict(const producer_settings& s, const std::string& name, std::initializer_list<std::string_view> accepted,
                     std::string_view required) {
    const auto it = s.props.find(name);
    if (it == s.props.end() || std::ranges::find(accepted, it->second) != accepted.end()) return;
    throw_configuration(s, "property '" + name + "' = '" + it->second + "' conflicts with " + s.purpose + ", which needs " +
                               std::string(required));
}

void validate(const producer_settings& s) {
    if (property_or(s.props, "bootstrap.servers", property_or(s.props, "metadata.broker.list", "")).empty())
        throw_configuration(s, "property 'bootstrap.servers' is missing");
    if (s.delivery_timeout.count() <= 0 || s.delivery_timeout.count() > INT_MAX)
        throw_configuration(s, "delivery_timeout = " + std::to_string(s.delivery_timeout.count()) +
                                   " ms is out of range (1 ms to INT_MAX ms)");
    const auto timeout = std::to_string(s.delivery_timeout.count());
    reject_conflict(s, "enable.idempotence", {"true"}, "enable.idempotence=true");
    reject_conflict(s, "acks", {"all", "-1"}, "acks=all");
    reject_conflict(s, "request.required.acks", {"all", "-1"}, "acks=all");
    for (const std::string name : {"message.timeout.ms", "delivery.timeout.ms"})
        reject_conflict(s, name, {timeout}, "it to equal the delivery timeout (" + timeout + " ms)");
}

/// The user's properties plus the ones the acknowledgement guarantee rests on.
properties forced_properties(const producer_settings& s) {
    properties props = s.props;
    props["enable.idempotence"] = "true";
    props["acks"] = "all";
    props["message.timeout.ms"] = std::to_string(s.delivery_timeout.count());
    return props;
}

/// Refused for its size, by this producer (message.max.bytes) or by the broker.
bool too_large(rd_kafka_resp_err_t err) {
    return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

/// The message opaque is a number, not a pointer to send()'s state: a report that arrives
/// after its send() gave up then finds nothing instead of freed memory.
void* opaque_of(std::uint64_t id) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)); }

/// A key or value for librdkafka, which tells null (a null pointer) from empty (any other pointer
/// with size 0); an empty string_view may have a null data(), so an empty one points at "".
const char* bytes_of(const std::optional<std::string_view>& bytes) {
    if (!bytes) return nullptr;
    return bytes->empty() ? "" : bytes->data();
}
std::size_t size_of(const std::optional<std::string_view>& bytes) { return bytes ? bytes->size() : 0; }
std::uint64_t id_of(void* opaque) { return reinterpret_cast<std::uintptr_t>(opaque); }

}  // namespace

/// Delivery reports of the records whose send() is still waiting, by record id.
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

awaited_delivery::awaited_delivery(pending_reports& reports, std::string describe, clock::time_point deadline)
    : reports_(&reports), id_(reports.open()), describe_(std::move(describe)), deadline_(deadline) {}

awaited_delivery::awaited_delivery(awaited_delivery&& other) noexcept
    : reports_(std::exchange(other.reports_, nullptr)), id_(other.id_), describe_(std::move(other.describe_)), deadline_(other.deadline_) {}

awaited_delivery::~awaited_delivery() {
    if (reports_) reports_->close(id_);
}

acknowledged_producer::acknowledged_producer(producer_settings settings)
    : settings_(std::move(settings)), reports_(std::make_unique<pending_reports>()) {
    validate(settings_);
    auto conf = make_conf(forced_properties(settings_), settings_.role);
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &acknowledged_producer::on_delivery);
    rd_kafka_conf_set_opaque(conf.get(), this);
    producer_.reset(make_client(RD_KAFKA_PRODUCER, std::move(conf), settings_.role));
}

acknowledged_producer::~acknowledged_producer() {
    rd_kafka_flush(producer_.get(), static_cast<int>(settings_.delivery_timeout.count()));
}

void acknowledged_producer::on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* self) {
    static_cast<acknowledged_producer*>(self)->reports_->arrive(id_of(message->_private), message->err);
}

void acknowledged_producer::send(const outgoing& r) {
    auto delivery = dispatch(r);
    await(delivery);
}

awaited_delivery acknowledged_producer::dispatch(const outgoing& r) {
    awaited_delivery delivery(*reports_, r.describe, clock::now() + settings_.delivery_timeout + report_grace);
    produce(r, delivery.id_, delivery.deadline_);
    return delivery;
}

void acknowledged_producer::produce(const outgoing& r, std::uint64_t id, clock::time_point deadline) {
    auto headers = to_kafka_headers(r.headers);
    for (;;) {
        const auto err = rd_kafka_producev(
            producer_.get(), RD_KAFKA_V_TOPIC(r.topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
            RD_KAFKA_V_KEY(bytes_of(r.key), size_of(r.key)),
            RD_KAFKA_V_VALUE(const_cast<char*>(bytes_of(r.value)), size_of(r.value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADERS(headers.get()), RD_KAFKA_V_OPAQUE(opaque_of(id)), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            headers.release();  // the message owns them now
            return;
        }
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || clock::now() >= deadline) fail(err, "producing " + r.describe);
        rd_kafka_poll(producer_.get(), poll_interval_ms);  // serving reports frees queue space
    }
}

void acknowledged_producer::await(awaited_delivery& d) {
    // Any waiting thread may serve any record's report; each one checks its own, first: awaiting
    // a batch, the reports of the later records came with the first one's.
    for (;;) {
        if (const auto err = reports_->take(d.id_)) {
            if (*err != RD_KAFKA_RESP_ERR_NO_ERROR) fail(*err, "delivering " + d.describe_);
            return;
        }
        if (clock::now() >= d.deadline_) break;
        rd_kafka_poll(producer_.get(), poll_interval_ms);
    }
    throw error(error_category::retryable, settings_.role + ": no delivery report for " + d.describe_ + " within " +
                                               std::to_string((settings_.delivery_timeout + report_grace).count()) + " ms");
}

/// Throws for `err`; a fatal error (the producer is unusable) carries librdkafka's cause.
void acknowledged_producer::fail(rd_kafka_resp_err_t err, const std::string& doing) const {
    if (too_large(err)) throw record_too_large(error_category::configuration, error_text(err, settings_.role + ": " + doing));
    if (err != RD_KAFKA_RESP_ERR__FATAL) throw_error(err, settings_.role + ": " + doing);
    std::array<char, 512> cause{};
    const auto fatal = rd_kafka_fatal_error(producer_.get(), cause.data(), cause.size());
    throw_error(fatal, settings_.role + ": " + doing + " (fatal, recreate the producer: " + cause.data() + ")");
}

std::int32_t acknowledged_producer::partition_count(const std::string& topic) {
    {
        const std::scoped_lock lock(partitions_mutex_);
        if (const auto it = partitions_.find(topic); it != partitions_.end()) return it->second;
    }
    const auto count = ask_partition_count(topic);  // unlocked: a metadata request takes a round trip
    const std::scoped_lock lock(partitions_mutex_);
    return partitions_.emplace(topic, count).first->second;
}

std::int32_t acknowledged_producer::ask_partition_count(const std::string& topic) const {
    struct metadata_deleter {
        void operator()(const rd_kafka_metadata_t* m) const noexcept { rd_kafka_metadata_destroy(m); }
    };
    // All topics rather than this one: asking for one topic lets the broker auto-create it, which
    // would hide a misspelt topic behind a fresh, wrongly partitioned one.
    const rd_kafka_metadata_t* raw = nullptr;
    if (const auto err = rd_kafka_metadata(producer_.get(), 1, nullptr, &raw, static_cast<int>(settings_.delivery_timeout.count())))
        fail(err, "asking the partitions of topic '" + topic + "'");
    const std::unique_ptr<const rd_kafka_metadata_t, metadata_deleter> metadata(raw);
    for (int i = 0; i < metadata->topic_cnt; ++i) {
        const auto& t = metadata->topics[i];
        if (t.topic == topic && t.err == RD_KAFKA_RESP_ERR_NO_ERROR && t.partition_cnt > 0) return t.partition_cnt;
    }
    throw error(error_category::configuration,
                settings_.role + ": topic '" + topic + "' does not exist (create it with its partitions first)");
}

}  // namespace seqinbox::kafka::detail
