#pragma once
// Private to the relay: the relay service on one store (relay.hpp describes it), generic over the
// store type; relay_postgresql.cpp and relay_mariadb.cpp instantiate it, each in a unit of its own.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "batch_timings.hpp"
#include "health_board.hpp"
#include "job_schedule.hpp"
#include "record_router.hpp"
#include "relay_parts.hpp"
#include "retry_board.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"
#include "seqinbox/kafka/publisher.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/metrics/prometheus.hpp"
#include "seqinbox/relay/http_endpoint.hpp"
#include "seqinbox/relay/operator_api.hpp"

namespace seqinbox::relay::detail {

struct relay_policies : default_policies {
    using metrics = ::seqinbox::metrics::prometheus_metrics;
    using logger = part_logger;
};

template <class Store>
class store_relay final : public relay_service {
public:
    using inbox_type = basic_inbox<Store, watched_source, kafka::dead_letter_sink, relay_policies>;
    using housekeeper_type = basic_housekeeper<Store, kafka::dead_letter_sink, clock::system_clock, logger::stream_logger>;
    using store_options = std::remove_cvref_t<decltype(std::declval<const Store&>().options())>;

    /// `consumers` opens the store of the consumer threads and jobs (store_pool_size()
    /// connections), `api` that of the operator API and /metrics (api_pool_size).
    store_relay(relay_options options, std::ostream& log, store_options consumers, store_options api)
        : options_(std::move(options)),
          access_(options_.tokens, where()),  // refuses an open address before anything connects
          logger_(log, options_.log_threshold),
          decls_(load(options_)),
          store_(std::move(consumers)),
          api_store_(std::move(api)),
          dead_letters_({.producer = producer_properties(options_), .topic = options_.dead_letter_topic,
                         .delivery_timeout = options_.delivery_timeout}),
          publisher_({.producer = producer_properties(options_), .delivery_timeout = options_.delivery_timeout}),
          topics_checked_(check_topics()),
          sources_(join_group()),
          retries_(*metrics_.shared_registry()),
          router_(options_.consumer_threads, options_.batch_size, max_routed_bytes),
          members_(make_members()),
          batch_size_(std::min(options_.batch_size, members_.front()->inbox.max_batch_records())),
          housekeeper_(store_, dead_letters_, declared_windows(options_.housekeeping, decls_), {}, logger_),
          api_(api_store_, access_, {.expiring_share = options_.expiring_share, .numbering = [this](const std::string& s) { return numbering_of(s); }}),
          http_(where(), routes(), [this](const http_request& r) { return api_(r); }, {.fixed_gate = probe_gate(access_)}) {
        for (const auto& m : members_) publish_released_messages(m->inbox);
    }

    ~store_relay() override { stop(); }
    store_relay(const store_relay&) = delete;
    store_relay& operator=(const store_relay&) = delete;

    void start() override {
        // Only a store with a limit clamps (PostgreSQL's lock table); MariaDB's has none.
        if constexpr (requires(const Store& s) { s.lock_table(); })
            if (batch_size_ < options_.batch_size)
                note(log_level::warn, "batch size " + std::to_string(options_.batch_size) +
                                          " is more than PostgreSQL's lock table lets one transaction hold (" + store_.lock_table() +
                                          ", half of them for the relay's " + std::to_string(store_.options().pool_size) +
                                          " connections): batches of " + std::to_string(batch_size_) +
                                          " records; a larger max_locks_per_transaction allows larger ones");
        for (std::size_t n = 1; n <= options_.consumer_threads; ++n) consumers_.emplace_back([this, n] { consume(n, *members_[n - 1]); });
        poller_ = std::thread([this] { poll_and_route(); });
        schedule_ = std::make_unique<job_schedule>(std::vector<job_schedule::job>{
            {options_.actions_every, [this](const std::stop_token&) { run_job("pending actions", [this] { run_actions(); }); }},
            // Gap timeouts at the pending actions' cadence and page size: a numbered context
            // waits at most its gap timeout plus one period before its policy applies.
            {options_.actions_every, [this](const std::stop_token&) { run_job("gap timeouts", [this] { run_gap_timeouts(); }); }},
            {options_.housekeeping_every,
             [this](const std::stop_token& stop) { run_job("housekeeping", [this, &stop] { run_housekeeping(stop); }); }},
        });
        note(log_level::info, "relay started: " + std::to_string(options_.consumer_threads) + " consumer thread(s), batches of up to " +
                                  std::to_string(batch_size_) + " records, " + serving());
    }

    void stop() override {
        if (stopped_.exchange(true)) return;
        stopping_ = true;  // the consumer threads end their batches meanwhile
        if (schedule_) schedule_->stop();  // a housekeeping run ends after its batch in progress
        router_.stop();
        if (poller_.joinable()) poller_.join();
        for (auto& t : consumers_) t.join();
        for (const auto& record : router_.take_all()) sources_.front()->redeliver(record);  // never decided: not committed
        for (const auto& source : sources_) source->close();  // commits what was decided, leaves the group
        note(log_level::info, timings_.describe(store_.statistics().round_trips));
        note(log_level::info, "relay stopped");
    }

    std::uint16_t http_port() const noexcept override { return http_.port(); }
    /// Healthy when every part's last attempt worked and no record is being retried.
    std::pair<bool, std::string> health() override {
        auto [fine, text] = health_.report();
        const auto retrying = members_.front()->watched.retrying();  // every member's
        if (retrying.empty()) return {fine, std::move(text)};
        return {false, (fine ? std::string() : text) + retrying};
    }

private:
    /// What one consumer thread decides: the records the poller routes to it (the contexts whose
    /// id hashes to it, whatever their partitions), with its own inbox object on the shared store.
    struct member {
        member(store_relay& relay, kafka::source& source, std::size_t thread)
            : watched(source, relay.retries_, relay.router_, thread,
                      {.first = kafka::source_options{}.poll_timeout, .linger = relay.options_.batch_linger}),
              inbox(relay.store_, watched, relay.dead_letters_, relay.decls_,
                    {.decoder = {relay.options_.type_header, relay.options_.idempotence_header},
                     .metrics = relay.metrics_,
                     .logger = part_logger(relay.logger_)}) {}
        watched_source watched;
        inbox_type inbox;
    };

    /// The relay's one member of its consumer group. Its poller routes each record to the
    /// consumer thread of its context: with a member per thread (each deciding its own
    /// partitions), a context whose records are spread over partitions was decided by every
    /// thread, and their batches waited for each other's instance locks.
    std::vector<std::unique_ptr<kafka::source>> join_group() {
        std::vector<std::unique_ptr<kafka::source>> sources;
        sources.push_back(std::make_unique<kafka::source>(source_options(), decls_, options_.input_topic));
        return sources;
    }

    std::vector<std::unique_ptr<member>> make_members() {
        std::vector<std::unique_ptr<member>> members;
        for (std::size_t n = 0; n < options_.consumer_threads; ++n) members.push_back(std::make_unique<member>(*this, *sources_.front(), n));
        return members;
    }

    /// Records routed and not yet decided weigh at most about this much (record_router.hpp), as
    /// much as librdkafka's own prefetch by default (queued.max.messages.kbytes).
    static constexpr std::size_t max_routed_bytes = std::size_t{64} << 20;

    /// The poller's source: its report lines name the poller, so the log shows the assignments.
    kafka::source_options source_options() {
        kafka::source_options o;
        o.clusters = consumer_clusters(options_);
        o.batch_linger = options_.batch_linger;
        o.report = [this](std::string_view line) { note(log_level::info, std::string(poller_name) + ": kafka: " + std::string(line)); };
        return o;
    }

    static constexpr std::string_view poller_name = "poller";

    static std::string consumer_name(std::size_t n) { return "consumer " + std::to_string(n); }

    /// A missing dead-letter or output topic stops the start, rather than failing every delivery
    /// (or the first bad record); checked before the source joins its group, so that a relay
    /// that cannot start does not make the group rebalance.
    bool check_topics() {
        dead_letters_.partitions();
        for (const auto& sequence : decls_.sequences) publisher_.partitions(output_topic_of(options_, sequence.name));
        return true;
    }

    /// The operator API's view of a numbered sequence's declaration; empty for any other.
    std::optional<numbering_rules> numbering_of(const std::string& sequence) const {
        for (const auto& declared : decls_.sequences)
            if (declared.name == sequence && declared.numbered()) return declared.numbering;
        return std::nullopt;
    }

    /// Every declared type's listener publishes to its sequence's output topic.
    void publish_released_messages(inbox_type& inbox) {
        for (const auto& sequence : decls_.sequences) {
            const auto topic = output_topic_of(options_, sequence.name);
            for (const auto& message : sequence.messages)
                inbox.on(message.qualified_type(),
                         [this, topic](const std::string&, const typename inbox_type::context& c) { publish(topic, c); });
        }
    }

    /// A publication the producer refuses (at once in a batch, too large say, or after waiting
    /// alone) sends the record to the dead-letter topic as publish_failed. A batch's delivery
    /// reports come later, in await(): the batch is given back and each record comes again alone.
    void publish(const std::string& topic, const typename inbox_type::context& c) {
        try {
            if (batch_publications) publisher_.publish_later(*batch_publications, topic, c.record, partition_key_of(c));
            else publisher_.publish(topic, c.record, partition_key_of(c));
        } catch (const std::exception& e) {
            throw listener_failure(failure_kind::publish_failed, "publishing to '" + topic + "' failed: " + e.what());
        }
    }

    /// Released messages of one context stay in order on one partition; others follow their key.
    static std::string_view partition_key_of(const typename inbox_type::context& c) {
        if (c.context_id.empty() && c.record.key) return *c.record.key;
        return c.context_id;
    }

    http_address where() const { return {.host = options_.http_host, .port = options_.http_port}; }

    /// What the HTTP endpoint offers, and where.
    std::string serving() const {
        const auto& t = options_.tokens;
        return "/metrics, /healthz, the operator API and console on " + options_.http_host + ":" + std::to_string(http_.port()) +
               " (views " + (t.view ? "need a token" : "open") + ", writes " + (t.write ? "need the write token" : "disabled") + ")";
    }

    std::map<std::string, http_handler> routes() {
        return {
            {"/metrics",
             [this] {
                 metrics_.refresh(api_store_, clock::system_clock{}.now(), options_.expiring_share);
                 members_.front()->watched.retrying();  // refreshes seqinbox_retrying_records
                 return http_response{200, std::string(metrics::prometheus_content_type), metrics_.shared_registry()->render()};
             }},
            {"/healthz",
             [this] {
                 auto [ok, text] = health();
                 return http_response{ok ? 200 : 503, "text/plain; charset=utf-8", std::move(text)};
             }},
        };
    }

    /// Takes records from the Kafka source while the consumer threads' queues have room, and
    /// queues each for the thread of its context (a record without one: of its partition).
    void poll_and_route() {
        const std::string part(poller_name);
        thread_part = part;
        while (!stopping_) {
            try {
                if (router_.wait_for_room(kafka::source_options{}.poll_timeout)) route(sources_.front()->poll_batch(batch_size_ * router_.threads()));
                health_.fine(part);
            } catch (const std::exception& e) {
                health_.failing(part, e.what());
                note(log_level::error, part + ": " + e.what());
                pause_unless_stopping();
            }
        }
    }

    void route(std::vector<envelope> records) {
        std::vector<std::vector<envelope>> by_thread(router_.threads());
        for (auto& record : records) {
            const auto context = members_.front()->inbox.context_id_of(record);
            const std::size_t hash = context ? std::hash<std::string>{}(*context)
                                             : std::hash<std::string>{}(record.topic) + static_cast<std::size_t>(record.partition);
            by_thread[hash % by_thread.size()].push_back(std::move(record));
        }
        router_.push(std::move(by_thread));
    }

    void consume(std::size_t n, member& m) {
        const std::string part = consumer_name(n);
        thread_part = part;
        while (!stopping_) {
            try {
                decide_next(m);
                health_.fine(part);
            } catch (const std::exception& e) {
                health_.failing(part, e.what());
                note(log_level::error, part + ": " + e.what());
                pause_unless_stopping();
            }
        }
    }

    /// A batch, or one record while a batch whose publications failed comes again.
    void decide_next(member& m) {
        if (m.watched.one_at_a_time()) {
            m.inbox.poll_once();
            return;
        }
        kafka::publication_batch publications;
        batch_publications = &publications;
        const struct done_batch {
            ~done_batch() { batch_publications = nullptr; }
        } done;
        batch_timings::batch b;
        b.started = b.awaiting = b.awaited = batch_timings::clock::now();
        b.records = m.inbox
                        .poll_batch(batch_size_, {.before_commit =
                                                      [this, &publications, &b] {
                                                          b.awaiting = batch_timings::clock::now();
                                                          await(publications);
                                                          b.awaited = batch_timings::clock::now();
                                                      }})
                        .size();
        b.ended = batch_timings::clock::now();
        b.polled = b.records > 0 ? m.watched.polled_at() : b.ended;
        timings_.add(b);
    }

    /// Every publication of the batch acknowledged, or the batch does not commit.
    void await(kafka::publication_batch& publications) {
        try {
            publisher_.await(publications);
        } catch (const error& e) {
            throw refused_publication(e);
        }
    }

    void pause_unless_stopping() {
        const auto until = std::chrono::steady_clock::now() + retry_pause;
        while (!stopping_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }

    /// Runs `job`; /healthz tells whether the last job run, of either job, reached the database.
    template <class Job>
    void run_job(const std::string& name, Job job) {
        try {
            job();
            health_.fine("jobs");
        } catch (const std::exception& e) {
            health_.failing("jobs", name + ": " + e.what());
            note(log_level::error, name + ": " + e.what());
        }
    }

    void run_actions() {
        // Any member's inbox: pending actions are the store's, not a partition's.
        if (const auto ran = members_.front()->inbox.run_pending_actions(options_.action_page_size, options_.action_pages); ran > 0)
            note(log_level::info, "pending actions: " + std::to_string(ran) + " executed");
    }

    void run_gap_timeouts() {
        // Any member's inbox, like the pending actions: the declarations and the store are shared.
        if (const auto resolved = members_.front()->inbox.run_gap_timeouts(options_.action_page_size, options_.action_pages); resolved > 0)
            note(log_level::info, "gap timeouts: " + std::to_string(resolved) + " context(s) past their sequence's gap timeout");
    }

    void run_housekeeping(const std::stop_token& stop) {
        const auto report = housekeeper_.run_once(stop);
        metrics_.housekeeping(report);
        const bool idle = report.closed_removed + report.marked + report.expired_removed == 0 && report.complete;
        note(idle ? log_level::debug : log_level::info, describe(report));
    }

    /// The relay's own lines quote exception texts (a database's may span lines, an engine's
    /// quotes a record's ids): escaped, each stays one line. Text escaped before reads the same.
    void note(log_level level, const std::string& line) {
        if (logger_.enabled(level)) logger_.log(level, seqinbox::detail::escaped(line));
    }

    relay_options options_;
    http_access access_;
    logger::stream_logger logger_;
    declarations<std::string> decls_;
    Store store_;      // consumers and jobs: store_pool_size()
    Store api_store_;  // the operator API and /metrics: api_pool_size
    kafka::dead_letter_sink dead_letters_;
    kafka::publisher publisher_;
    [[maybe_unused]] bool topics_checked_;  // before sources_: see check_topics()
    std::vector<std::unique_ptr<kafka::source>> sources_;  // the relay's group member (one)
    metrics::prometheus_metrics metrics_;
    retry_board retries_;
    record_router router_;
    std::vector<std::unique_ptr<member>> members_;  // members_[n - 1] is consumer thread n's
    /// options_.batch_size within what one batch transaction may decide (the store's lock table,
    /// see postgresql::store::max_batch_records; unlimited on MariaDB): a poll is then one transaction, and a consumer thread
    /// sees a stop between two of them.
    std::size_t batch_size_;
    housekeeper_type housekeeper_;
    health_board health_;
    batch_timings timings_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> stopped_{false};
    std::vector<std::thread> consumers_;
    std::thread poller_;
    std::unique_ptr<job_schedule> schedule_;
    operator_api<Store> api_;
    http_endpoint http_;  // last: its routes use the members above, and it stops first
};


}  // namespace seqinbox::relay::detail
