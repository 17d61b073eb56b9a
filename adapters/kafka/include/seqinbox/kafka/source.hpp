#pragma once
// The Kafka message source: one consumer-group member per cluster, subscribed to every topic the
// declarations name, with offsets committed only behind durable inbox decisions.
//
// Offsets. Auto-commit is off. A polled record stays in flight until the inbox acknowledges it
// (its decision is durable) or gives it back (redeliver: the consumer seeks back to it). The
// offset committed for a partition is the first record not decided yet, so a record is committed
// only after the decision for it and for every earlier record of its partition is durable. A
// record given back holds the commit position until it was polled again and decided; when
// several threads give back records of one partition, the consumer seeks to the lowest of them.
// Commits are asynchronous, at most every `commit_interval`; close() and every partition
// revocation commit synchronously. After a crash, records past the last commit come again and
// the inbox skips the ones already decided as duplicates.
//
// Where a new group starts. A partition without a committed offset starts at its earliest
// record (`auto.offset.reset` defaults to `default_offset_reset`, not librdkafka's `latest`):
// an inbox must not skip what was produced before its group first joined. Set
// `auto.offset.reset=latest` in the cluster's properties to start at the end instead. Each
// assignment is reported (options.report), one line per partition with where it starts.
//
// Rebalances. Before partitions are revoked, the source waits (up to `revoke_timeout`) until the
// records of those partitions polled by any thread are decided, then commits them; a record
// decided later is simply delivered again to the new owner and skipped there as a duplicate.
// A partition assigned again starts from the group's committed offset.
//
// Timing (README, "Timing, all together"): a consumer thread polls again only after the inbox decided its record, which
// includes the listener and the release pass it may trigger (every buffered successor replayed
// in the same transaction). Keep `max.poll.interval.ms` above the longest such pass, the
// database's lock waits and the pool's acquire_timeout; the PostgreSQL store holds one pooled
// connection per consumer thread for the whole listener (two with requires_new steps), and
// idle_in_transaction_session_timeout must exceed the longest listener. librdkafka's default of
// 300 s suits listeners of seconds; raise it, never lower it below the listener's worst case.
//
// A revocation that comes while poll_batch() assembles a batch takes the revoked partitions'
// records out of it (they were never handed out; the new owner gets them), so that it does not
// wait for records the polling thread itself holds.
//
// Thread safety: poll, poll_batch, acknowledge and redeliver may be called from any number of threads (an
// inbox's poll_once from several consumer threads); polling itself is serialised. acknowledge and
// redeliver never wait for a poll: redeliver marks the record given back and the next poll, on
// whichever thread, seeks back first; so a revocation that another thread's poll serves, waiting
// for a batch, is not held up by that batch being given back. close() and the destructor must
// not race with other calls.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/properties.hpp"
#include "seqinbox/source/concept.hpp"

namespace seqinbox::kafka {

/// `auto.offset.reset` unless a cluster's properties say otherwise: start where nothing is lost.
inline constexpr std::string_view default_offset_reset = "earliest";

/// One Kafka cluster to consume: its name (what a declaration's `cluster` refers to; "" is the
/// default cluster) and its consumer properties (bootstrap.servers and group.id are required).
struct cluster_config {
    std::string name{};
    properties consumer{};
};

/// Topics to subscribe to, per cluster name.
struct subscription {
    std::string cluster{};
    std::set<std::string> topics{};
};

struct source_options {
    std::vector<cluster_config> clusters{};
    /// How long one poll() or poll_batch() waits for a record before it returns nothing.
    std::chrono::milliseconds poll_timeout{100};
    /// How long poll_batch() waits for more once it has a record (0: only what is fetched already).
    std::chrono::milliseconds batch_linger{5};
    /// Acknowledged offsets are committed asynchronously at most this often.
    std::chrono::milliseconds commit_interval{500};
    /// How long a revocation waits for in-flight records of the revoked partitions.
    std::chrono::milliseconds revoke_timeout{std::chrono::seconds(30)};
    /// Receives consumer errors librdkafka recovers from by itself (brokers down, commit
    /// failures), one line each; empty: they go to stderr.
    std::function<void(std::string_view)> report{};
};

/// The subscriptions `decls` need: each declared type's topic (or `default_topic`) on its cluster.
/// Throws seqinbox::error(configuration) when a type has no topic and `default_topic` is empty.
template <class Message>
std::vector<subscription> subscriptions_of(const declarations<Message>& decls, const std::string& default_topic);

/// Counters of one source.
struct source_statistics {
    std::uint64_t polled = 0;        ///< records handed to the inbox
    std::uint64_t acknowledged = 0;  ///< records whose decision was durable
    std::uint64_t redelivered = 0;   ///< records given back (the consumer sought back)
    std::uint64_t commits = 0;       ///< offset commits sent
    std::uint64_t commit_failures = 0;
    std::uint64_t rebalances = 0;    ///< assignments and revocations seen
    std::uint64_t consumer_errors = 0;  ///< transient errors librdkafka reported and recovered from
};

class source {
public:
    /// Creates one consumer per cluster of `options` and subscribes it to its topics. Throws
    /// seqinbox::error(configuration) naming the cluster and property for bad configuration,
    /// enable.auto.commit=true included, or a subscription naming an unconfigured cluster.
    source(source_options options, const std::vector<subscription>& subscriptions);

    template <class Message>
    source(source_options options, const declarations<Message>& decls, const std::string& default_topic)
        : source(std::move(options), subscriptions_of(decls, default_topic)) {}

    source(const source&) = delete;
    source& operator=(const source&) = delete;
    /// Graceful shutdown when close() was not called (errors are swallowed here, not in close()).
    ~source();

    /// The next record of any cluster, or nothing when none arrived within poll_timeout.
    /// Throws seqinbox::error for fatal consumer errors.
    std::optional<envelope> poll();
    /// Up to `max` records, in each partition's order: what librdkafka fetched already, plus what
    /// arrives within batch_linger after the first; nothing when none arrived within poll_timeout.
    /// Each record is acknowledged or given back on its own, as poll()'s are.
    std::vector<envelope> poll_batch(std::size_t max);
    /// The inbox decision for `record` is durable: its offset may be committed.
    void acknowledge(const envelope& record);
    /// No decision was reached for `record`: it comes again (and what follows it in its
    /// partition, unless decided already). Records of one partition may be given back in any
    /// order (a batch gives back its last first): the consumer seeks to the lowest of them,
    /// at the start of the next poll (this call does not wait for a poll under way).
    void redeliver(const envelope& record);
    /// Whether `record` was polled by this member and no decision for it is durable yet (in
    /// flight, or given back and not decided since, maybe through another copy of it); false
    /// once its partition was revoked.
    bool undecided(const envelope& record) const;

    /// Commits every acknowledged offset now and waits for the result (throws on failure).
    void commit();
    /// Graceful shutdown: waits for in-flight records (revoke_timeout), commits, leaves the group.
    /// A commit that fails here is reported, not thrown: the records after the last commit
    /// come again to the next member and are skipped as duplicates.
    void close();
    /// Drops the consumers without committing or leaving the group, as a crashed process would
    /// (tests and failure drills; the group notices after session.timeout.ms).
    void abandon() noexcept;

    source_statistics statistics() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

static_assert(redelivering_source<source> && batch_source<source>);

template <class Message>
std::vector<subscription> subscriptions_of(const declarations<Message>& decls, const std::string& default_topic) {
    std::vector<subscription> result;
    auto subscribe = [&](const std::string& cluster, const std::string& topic) {
        for (auto& s : result)
            if (s.cluster == cluster) return void(s.topics.insert(topic));
        result.push_back({cluster, {topic}});
    };
    for (const auto& seq : decls.sequences)
        for (const auto& msg : seq.messages) {
            if (msg.topic.empty() && default_topic.empty())
                throw error(error_category::configuration,
                            "message type '" + msg.qualified_type() + "' names no topic and no default topic is configured");
            subscribe(msg.cluster, msg.topic.empty() ? default_topic : msg.topic);
        }
    return result;
}

}  // namespace seqinbox::kafka
