#include "seqinbox/kafka/source.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <map>
#include <set>
#include <mutex>
#include <string_view>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "client.hpp"
#include "offset_tracker.hpp"

namespace seqinbox::kafka {

namespace {

using detail::commit_position;
using detail::partition_id;

/// The properties of one cluster's consumer, checked: what the source relies on is required or
/// forced, so a misconfigured group fails here rather than by losing or redelivering records.
properties checked_consumer_properties(const cluster_config& cluster) {
    const std::string role = "Kafka consumer of cluster '" + cluster.name + "'";
    for (const char* required : {"bootstrap.servers", "group.id"})
        if (detail::property_or(cluster.consumer, required, "").empty())
            throw error(error_category::configuration, role + ": property '" + required + "' is required");
    const std::string auto_commit = detail::property_or(cluster.consumer, "enable.auto.commit", "false");
    if (auto_commit != "false")
        throw error(error_category::configuration,
                    role + ": 'enable.auto.commit' = '" + auto_commit +
                        "' is not supported: seqinbox commits an offset only after the inbox decision is durable");
    properties props = cluster.consumer;
    props["enable.auto.commit"] = "false";
    props["enable.auto.offset.store"] = "false";
    props.try_emplace("auto.offset.reset", std::string(default_offset_reset));
    return props;
}

timestamp time_of(const rd_kafka_message_t& m) {
    rd_kafka_timestamp_type_t type;
    const std::int64_t ms = rd_kafka_message_timestamp(&m, &type);
    return ms < 0 ? timestamp{} : timestamp{std::chrono::milliseconds(ms)};
}

envelope to_envelope(const rd_kafka_message_t& m, const std::string& cluster) {
    envelope e;
    if (m.key) e.key.emplace(static_cast<const char*>(m.key), m.key_len);  // else null: no key
    if (m.payload) e.value.emplace(static_cast<const char*>(m.payload), m.len);  // else null: a tombstone
    e.headers = detail::headers_of(m);
    e.topic = rd_kafka_topic_name(m.rkt);
    e.partition = m.partition;
    e.offset = m.offset;
    e.time = time_of(m);
    e.cluster = cluster;
    return e;
}

detail::partition_list_ptr to_partition_list(const std::vector<commit_position>& positions) {
    detail::partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(positions.size())));
    for (const auto& p : positions)
        rd_kafka_topic_partition_list_add(list.get(), p.where.topic.c_str(), p.where.partition)->offset = p.offset;
    return list;
}

/// Accepts the partitions named in `list` (of one consumer).
auto named_in(const rd_kafka_topic_partition_list_t& list) {
    return [&list](const partition_id& where) {
        return rd_kafka_topic_partition_list_find(&list, where.topic.c_str(), where.partition) != nullptr;
    };
}

}  // namespace

struct source::impl {
    /// One group member: a librdkafka consumer of one cluster.
    struct consumer {
        impl* owner = nullptr;
        std::size_t index = 0;
        std::string cluster;
        detail::client_ptr client{};  ///< destroying it closes the member: its callbacks still run
        bool cooperative = false;   ///< incremental (cooperative-sticky) rather than eager rebalances
        std::string offset_reset{};  ///< where a partition without a committed offset starts
        int assigned = 0;           ///< partitions assigned now (changed by rebalances, under the poll lock)
        bool ever_assigned = false;  ///< an assignment (maybe empty) arrived since the start
    };

    source_options options;
    std::mutex poll_mutex;  // librdkafka's poll runs rebalance callbacks: one poller at a time
    std::size_t next_consumer = 0;
    std::set<partition_id> failed_seeks;  // under poll_mutex: reported once, retried before each poll
    std::vector<envelope>* assembling = nullptr;  // the batch poll_batch() is filling, under poll_mutex

    mutable std::mutex mutex;  // guards tracker, seeks_due, stats, last_commit
    std::condition_variable decided;
    detail::offset_tracker tracker;
    std::set<partition_id> seeks_due;  // given back since the last poll: the next poll seeks them back first
    source_statistics stats;
    std::chrono::steady_clock::time_point last_commit = std::chrono::steady_clock::now();
    std::atomic<bool> closed{false};
    // Last: consumers are destroyed first, while the state their callbacks use still exists.
    std::vector<std::unique_ptr<consumer>> consumers;

    impl(source_options o, const std::vector<subscription>& subscriptions) : options(std::move(o)) {
        check_cluster_names();
        for (const auto& [cluster, topics] : topics_by_cluster(subscriptions)) subscribe(cluster_config_of(cluster), topics);
        if (consumers.empty()) throw error(error_category::configuration, "seqinbox::kafka::source: no topic to subscribe to");
    }

    void check_cluster_names() const {
        if (options.clusters.empty()) throw error(error_category::configuration, "seqinbox::kafka::source: no cluster configured");
        std::set<std::string> names;
        for (const auto& c : options.clusters)
            if (!names.insert(c.name).second)
                throw error(error_category::configuration, "seqinbox::kafka::source: cluster '" + c.name + "' is configured twice");
    }

    /// One consumer per cluster, whatever the number of subscriptions naming it.
    static std::map<std::string, std::set<std::string>> topics_by_cluster(const std::vector<subscription>& subscriptions) {
        std::map<std::string, std::set<std::string>> result;
        for (const auto& s : subscriptions) result[s.cluster].insert(s.topics.begin(), s.topics.end());
        return result;
    }

    const cluster_config& cluster_config_of(const std::string& name) const {
        for (const auto& c : options.clusters)
            if (c.name == name) return c;
        throw error(error_category::configuration,
                    "seqinbox::kafka::source: a declared type names cluster '" + name + "', which is not configured");
    }

    void subscribe(const cluster_config& cluster, const std::set<std::string>& topics) {
        auto member = std::make_unique<consumer>(consumer{this, consumers.size(), cluster.name});
        member->cooperative = detail::property_or(cluster.consumer, "partition.assignment.strategy", "").find("cooperative") !=
                              std::string::npos;
        member->offset_reset = detail::property_or(cluster.consumer, "auto.offset.reset", std::string(default_offset_reset));
        const std::string role = "Kafka consumer of cluster '" + cluster.name + "'";
        auto conf = detail::make_conf(checked_consumer_properties(cluster), role);
        rd_kafka_conf_set_rebalance_cb(conf.get(), on_rebalance);
        rd_kafka_conf_set_offset_commit_cb(conf.get(), on_commit);
        rd_kafka_conf_set_opaque(conf.get(), member.get());
        member->client.reset(detail::make_client(RD_KAFKA_CONSUMER, std::move(conf), role));
        consumers.push_back(std::move(member));  // owned before anything else can throw
        consumer& c = *consumers.back();
        rd_kafka_poll_set_consumer(c.client.get());
        detail::partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
        for (const auto& topic : topics) rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
        if (const auto err = rd_kafka_subscribe(c.client.get(), list.get()))
            detail::throw_error(err, role + ": subscribing");
    }

    // ---- polling ----

    std::optional<envelope> poll() {
        std::lock_guard poll_lock(poll_mutex);
        prepare_poll("poll()");
        return poll_any(options.poll_timeout);
    }

    std::vector<envelope> poll_batch(std::size_t max) {
        std::lock_guard poll_lock(poll_mutex);
        prepare_poll("poll_batch()");
        std::vector<envelope> batch;
        if (max == 0) return batch;
        auto first = poll_any(options.poll_timeout);
        if (!first) return batch;
        batch.push_back(std::move(*first));
        assembling = &batch;
        const struct done_assembling {
            std::vector<envelope>*& slot;
            ~done_assembling() { slot = nullptr; }
        } done{assembling};
        const auto deadline = std::chrono::steady_clock::now() + options.batch_linger;
        while (batch.size() < max) {
            const auto left = std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
                                       std::chrono::milliseconds(0));
            if (auto next = poll_any(left)) batch.push_back(std::move(*next));
            else if (left.count() == 0) break;
        }
        return batch;
    }

    /// Under poll_mutex, before each poll.
    void prepare_poll(const char* what) {
        if (closed) throw error(error_category::misuse, std::string("seqinbox::kafka::source: ") + what + " after close()");
        apply_seeks();
        commit_if_due();
    }

    /// The next record of any consumer within `timeout` (shared among them), round robin.
    std::optional<envelope> poll_any(std::chrono::milliseconds timeout) {
        const auto share = timeout / static_cast<int>(consumers.size());
        for (std::size_t tried = 0; tried < consumers.size(); ++tried) {
            consumer& c = *consumers[next_consumer];
            next_consumer = (next_consumer + 1) % consumers.size();
            if (auto record = poll_one(c, share)) return record;
        }
        return std::nullopt;
    }

    std::optional<envelope> poll_one(consumer& c, std::chrono::milliseconds timeout) {
        detail::message_ptr m(rd_kafka_consumer_poll(c.client.get(), static_cast<int>(timeout.count())));
        if (!m) return std::nullopt;
        if (m->err) {
            consumer_error(c, *m);
            return std::nullopt;
        }
        envelope record = to_envelope(*m, c.cluster);
        std::lock_guard lock(mutex);
        tracker.polled(id_of(c.index, record), record.offset);
        ++stats.polled;
        return record;
    }

    void consumer_error(consumer& c, const rd_kafka_message_t& m) {
        if (m.err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return;
        char reason[512];
        if (rd_kafka_fatal_error(c.client.get(), reason, sizeof reason) != RD_KAFKA_RESP_ERR_NO_ERROR)
            throw error(error_category::configuration, "Kafka consumer of cluster '" + c.cluster + "' failed fatally: " + reason);
        {
            std::lock_guard lock(mutex);
            ++stats.consumer_errors;
        }
        report("cluster '" + c.cluster + "': " + rd_kafka_message_errstr(&m));
    }

    void report(const std::string& line) const {
        if (options.report) options.report(line);
        else std::cerr << "seqinbox::kafka::source: " << line << '\n';
    }

    // ---- decisions ----

    std::size_t index_of(const envelope& record) const {
        for (const auto& c : consumers)
            if (c->cluster == record.cluster) return c->index;
        throw error(error_category::misuse, "seqinbox::kafka::source: record of unknown cluster '" + record.cluster + "'");
    }

    static partition_id id_of(std::size_t cluster, const envelope& record) { return {cluster, record.topic, record.partition}; }

    void acknowledge(const envelope& record) {
        {
            std::lock_guard lock(mutex);
            tracker.decided(id_of(index_of(record), record), record.offset);
            ++stats.acknowledged;
        }
        decided.notify_all();
        commit_if_due();
    }

    /// The record counts as given back at once and the seek is left to the next poll: a
    /// revocation waiting for in-flight records holds poll_mutex, and the rest of this record's
    /// batch may be among them (issue 33). The seek goes to the partition's lowest record given
    /// back and not polled again by then, so that concurrent give-backs cannot skip one.
    void redeliver(const envelope& record) {
        const partition_id where = id_of(index_of(record), record);
        {
            std::lock_guard lock(mutex);
            tracker.given_back(where, record.offset);
            seeks_due.insert(where);
            ++stats.redelivered;
        }
        decided.notify_all();
    }

    /// Under poll_mutex, before each poll: seeks back the partitions given back since. One whose
    /// seek failed would never deliver its given-back record again (and its commit position would
    /// stay below it): the seek is retried until it works or nothing is left to seek to (decided
    /// meanwhile, or the partition was revoked and forgotten).
    void apply_seeks() {
        std::set<partition_id> due;
        {
            std::lock_guard lock(mutex);
            due.swap(seeks_due);
        }
        due.insert(failed_seeks.begin(), failed_seeks.end());
        for (const auto& where : due)
            if (const auto failure = seek_back(where); failure.empty()) failed_seeks.erase(where);
            else if (failed_seeks.insert(where).second)
                report("cluster '" + consumers[where.cluster]->cluster + "': seeking back in " + where.topic + "/" +
                       std::to_string(where.partition) + " failed (" + failure + "): retried before each poll while its record waits");
    }

    /// Seeks `where` to its lowest given-back record not polled again, if any; why that failed,
    /// or "". Under poll_mutex: no poll runs meanwhile.
    std::string seek_back(const partition_id& where) {
        std::optional<std::int64_t> target;
        {
            std::lock_guard lock(mutex);
            target = tracker.seek_target(where);
        }
        return target ? seek(*consumers[where.cluster], where, *target) : std::string();
    }

    static std::string seek(consumer& c, const partition_id& where, std::int64_t offset) {
        detail::partition_list_ptr list(rd_kafka_topic_partition_list_new(1));
        rd_kafka_topic_partition_list_add(list.get(), where.topic.c_str(), where.partition)->offset = offset;
        if (rd_kafka_error_t* failure = rd_kafka_seek_partitions(c.client.get(), list.get(), 10000)) {
            std::string text = "to offset " + std::to_string(offset) + ": " + rd_kafka_error_string(failure);
            rd_kafka_error_destroy(failure);
            return text;
        }
        if (const auto err = list->elems[0].err) return "to offset " + std::to_string(offset) + ": " + rd_kafka_err2str(err);
        return {};
    }

    // ---- commits ----

    void commit_if_due() {
        if (closed) return;
        std::vector<std::vector<commit_position>> due(consumers.size());
        {
            std::lock_guard lock(mutex);
            const auto now = std::chrono::steady_clock::now();
            if (now - last_commit < options.commit_interval) return;
            last_commit = now;
            for (const auto& c : consumers) due[c->index] = tracker.take_commits(c->index);
        }
        for (const auto& c : consumers)
            if (!due[c->index].empty()) send_commit(*c, due[c->index], true);
    }

    /// Commits `positions`. A failure makes them due again (on_commit for asynchronous commits);
    /// a synchronous commit also throws it.
    void send_commit(consumer& c, const std::vector<commit_position>& positions, bool async) {
        auto list = to_partition_list(positions);
        {
            std::lock_guard lock(mutex);
            ++stats.commits;
        }
        const auto err = async ? rd_kafka_commit(c.client.get(), list.get(), 1) : commit_and_wait(c, *list);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) detail::throw_error(err, "committing offsets of cluster '" + c.cluster + "'");
    }

    /// A synchronous commit whose result includes the per-partition errors (rd_kafka_commit's
    /// return value does not: an evicted member's commit "succeeds" there).
    rd_kafka_resp_err_t commit_and_wait(consumer& c, const rd_kafka_topic_partition_list_t& list) {
        struct outcome {
            consumer* member;
            rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
        } result{&c};
        auto served = [](rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets, void* opaque) {
            auto& r = *static_cast<outcome*>(opaque);
            if (err == RD_KAFKA_RESP_ERR_NO_ERROR && offsets) err = first_partition_error(*offsets);
            if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) err = RD_KAFKA_RESP_ERR_NO_ERROR;
            if (err != RD_KAFKA_RESP_ERR_NO_ERROR && offsets) r.member->owner->commit_failed(*r.member, *offsets);
            r.err = err;
        };
        const auto err = rd_kafka_commit_queue(c.client.get(), &list, nullptr, served, &result);  // no queue: served here
        return err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : result.err;
    }

    static rd_kafka_resp_err_t first_partition_error(const rd_kafka_topic_partition_list_t& list) {
        for (int i = 0; i < list.cnt; ++i)
            if (list.elems[i].err) return list.elems[i].err;
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }

    void commit_failed(consumer& c, const rd_kafka_topic_partition_list_t& list) {
        std::lock_guard lock(mutex);
        ++stats.commit_failures;
        for (int i = 0; i < list.cnt; ++i)
            tracker.commit_failed({{c.index, list.elems[i].topic, list.elems[i].partition}, list.elems[i].offset});
    }

    void commit_now() {
        if (closed) throw error(error_category::misuse, "seqinbox::kafka::source: commit() after close()");
        for (const auto& c : consumers) {
            std::vector<commit_position> due;
            {
                std::lock_guard lock(mutex);
                due = tracker.take_commits(c->index, true);  // asynchronous commits may still fail
            }
            if (!due.empty()) send_commit(*c, due, false);
        }
    }

    static void on_commit(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets, void* opaque) {
        if (err == RD_KAFKA_RESP_ERR__NO_OFFSET || !offsets) return;
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = first_partition_error(*offsets);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
        auto& c = *static_cast<consumer*>(opaque);
        c.owner->commit_failed(c, *offsets);  // the positions are committed again next time
        c.owner->report("cluster '" + c.cluster + "': asynchronous commit failed: " + rd_kafka_err2str(err));
    }

    // ---- rebalances ----

    static void on_rebalance(rd_kafka_t* client, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
                             void* opaque) {
        auto& c = *static_cast<consumer*>(opaque);
        {
            std::lock_guard lock(c.owner->mutex);
            ++c.owner->stats.rebalances;
        }
        c.ever_assigned = c.ever_assigned || err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
        c.owner->report("cluster '" + c.cluster + "': " + (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? "assigned " : "revoked ") +
                        std::to_string(partitions->cnt) + " partitions");
        if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) c.owner->finish_revoked(c, *partitions);
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
            c.owner->note_assigned(c, *partitions);
            c.owner->report_start_positions(c, *partitions);
        }
        apply_assignment(client, c.cooperative, err, partitions);
        c.assigned = assigned_after(c, err, partitions->cnt);
    }

    static int assigned_after(const consumer& c, rd_kafka_resp_err_t err, int changed) {
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) return c.cooperative ? c.assigned + changed : changed;
        if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && c.cooperative) return c.assigned - changed;
        return 0;
    }

    // The protocol is known from the configuration: rd_kafka_rebalance_protocol() would wait for
    // the group thread, which blocks forever inside rd_kafka_consumer_close().
    static void apply_assignment(rd_kafka_t* client, bool cooperative, rd_kafka_resp_err_t err,
                                 rd_kafka_topic_partition_list_t* partitions) {
        const bool assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
        if (cooperative) {
            rd_kafka_error_t* failure = assign ? rd_kafka_incremental_assign(client, partitions)
                                               : rd_kafka_incremental_unassign(client, partitions);
            if (failure) rd_kafka_error_destroy(failure);
        } else {
            rd_kafka_assign(client, assign ? partitions : nullptr);
        }
    }

    /// A partition assigned (again) starts from the group's committed offset: nothing this
    /// member tracked for it before may be committed now (another member may have committed
    /// further meanwhile).
    void note_assigned(consumer& c, const rd_kafka_topic_partition_list_t& partitions) {
        std::lock_guard lock(mutex);
        tracker.forget(c.index, named_in(partitions));
    }

    /// One line per assigned partition: its committed offset, or where it starts without one.
    void report_start_positions(consumer& c, const rd_kafka_topic_partition_list_t& partitions) {
        detail::partition_list_ptr committed(rd_kafka_topic_partition_list_copy(&partitions));
        const auto err = rd_kafka_committed(c.client.get(), committed.get(), 5000);
        for (int i = 0; i < committed->cnt; ++i) {
            const auto& p = committed->elems[i];
            const std::string name = std::string(p.topic) + "/" + std::to_string(p.partition);
            if (err != RD_KAFKA_RESP_ERR_NO_ERROR || p.err != RD_KAFKA_RESP_ERR_NO_ERROR)
                report("cluster '" + c.cluster + "': " + name + " starts at its committed offset (not known: " +
                       rd_kafka_err2str(err ? err : p.err) + ")");
            else if (p.offset >= 0)
                report("cluster '" + c.cluster + "': " + name + " starts at committed offset " + std::to_string(p.offset));
            else
                report("cluster '" + c.cluster + "': " + name + " has no committed offset: starts at the " +
                       (c.offset_reset == "earliest" || c.offset_reset == "smallest" || c.offset_reset == "beginning"
                            ? std::string("earliest offset")
                            : "offset auto.offset.reset=" + c.offset_reset + " says"));
        }
    }

    /// Before revoked partitions go to another member: wait for their in-flight records, commit.
    void finish_revoked(consumer& c, const rd_kafka_topic_partition_list_t& partitions) {
        const auto owned = named_in(partitions);
        std::vector<commit_position> due;
        {
            std::unique_lock lock(mutex);
            take_out_of_assembling_batch(c, owned);
            const bool idle = decided.wait_for(lock, options.revoke_timeout, [&] { return tracker.in_flight(c.index, owned) == 0; });
            if (!idle)
                report("cluster '" + c.cluster + "': records still in flight after revoke_timeout; the new owner receives them again");
            due = tracker.take_commits(c.index, owned, true);  // also positions whose asynchronous commit may still fail
        }
        try {
            if (!due.empty()) send_commit(c, due, false);
        } catch (const error& e) {
            // The next owner starts from the previous commit: duplicates, no loss.
            report(std::string("commit before revocation failed: ") + e.what());
        }
        std::lock_guard lock(mutex);
        tracker.forget(c.index, owned);
    }

    /// The revocation runs inside the poll that fills a batch: its records of revoked partitions
    /// were never handed out, so they leave the batch (given back: never committed here) rather
    /// than hold the revocation until revoke_timeout. Under mutex and poll_mutex.
    template <class Owned>
    void take_out_of_assembling_batch(const consumer& c, const Owned& owned) {
        if (!assembling) return;
        std::erase_if(*assembling, [&](const envelope& record) {
            const partition_id where = id_of(c.index, record);
            if (record.cluster != c.cluster || !owned(where)) return false;
            tracker.given_back(where, record.offset);
            return true;
        });
    }

    // ---- shutdown ----

    void close() {
        std::lock_guard poll_lock(poll_mutex);
        if (closed) return;
        for (const auto& c : consumers) give_up_partitions(*c);
        try {
            commit_now();
        } catch (const error& e) {  // the next owner gets the records after the last commit again: duplicates, no loss
            report(std::string("closing: ") + e.what());
        }
        closed = true;
        for (const auto& c : consumers)
            if (const auto err = rd_kafka_consumer_close(c->client.get()))
                report("cluster '" + c->cluster + "': closing: " + rd_kafka_err2str(err));
        destroy_consumers(0);
    }

    /// Unsubscribes and serves the revocation here (it waits for in-flight records and commits)
    /// rather than inside rd_kafka_consumer_close(), where librdkafka 2.0's rd_kafka_assign()
    /// can block forever (confluentinc/librdkafka#4884).
    void give_up_partitions(consumer& c) {
        await_first_assignment(c);
        if (const auto err = rd_kafka_unsubscribe(c.client.get())) {
            report("cluster '" + c.cluster + "': unsubscribing: " + rd_kafka_err2str(err));
            return;
        }
        poll_until(c, [&c] { return c.assigned == 0; }, options.revoke_timeout + std::chrono::seconds(10));
    }

    /// librdkafka before 2.3.0 aborts when it destroys a cooperative-sticky member that joined
    /// its group but has not received its first assignment: the assignor's state is created
    /// only then (confluentinc/librdkafka#4312). Such a member waits for that assignment, so
    /// that it leaves the group the ordinary way.
    void await_first_assignment(consumer& c) {
        if (!c.cooperative || c.ever_assigned || rd_kafka_version() >= 0x020300ff || !has_member_id(c)) return;
        // Bounded apart from revoke_timeout: a supervisor's grace period (often 30 s) covers
        // this wait and the revocation after it.
        if (!poll_until(c, [&c] { return c.ever_assigned; }, std::chrono::seconds(10)))
            report("cluster '" + c.cluster + "': no first assignment before closing; librdkafka " + rd_kafka_version_str() +
                   " may abort on destroying this member");
    }

    /// Whether a JoinGroup reply reached `c` (the member id comes with it).
    static bool has_member_id(const consumer& c) {
        char* id = rd_kafka_memberid(c.client.get());
        const bool joined = id != nullptr && *id != '\0';
        rd_kafka_mem_free(c.client.get(), id);
        return joined;
    }

    /// Polls `c` until `done()` or `patience` passed; whether done. Records fetched meanwhile
    /// are dropped: they were never handed out, so they come again to the next owner.
    template <class Done>
    static bool poll_until(consumer& c, Done done, std::chrono::milliseconds patience) {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (!done() && std::chrono::steady_clock::now() < deadline)
            detail::message_ptr dropped(rd_kafka_consumer_poll(c.client.get(), 100));
        return done();
    }

    void destroy_consumers(int flags) noexcept {
        for (auto& c : consumers)
            if (c->client) rd_kafka_destroy_flags(c->client.release(), flags);
    }
};

source::source(source_options options, const std::vector<subscription>& subscriptions)
    : impl_(std::make_unique<impl>(std::move(options), subscriptions)) {}

source::~source() {
    try {
        impl_->close();
    } catch (const std::exception& e) {
        impl_->report(std::string("closing: ") + e.what());
    }
}

std::optional<envelope> source::poll() { return impl_->poll(); }
std::vector<envelope> source::poll_batch(std::size_t max) { return impl_->poll_batch(max); }
void source::acknowledge(const envelope& record) { impl_->acknowledge(record); }
void source::redeliver(const envelope& record) { impl_->redeliver(record); }

bool source::undecided(const envelope& record) const {
    std::lock_guard lock(impl_->mutex);
    return impl_->tracker.undecided(impl::id_of(impl_->index_of(record), record), record.offset);
}
void source::commit() { impl_->commit_now(); }
void source::close() { impl_->close(); }

void source::abandon() noexcept {
    std::lock_guard poll_lock(impl_->poll_mutex);
    impl_->closed = true;
    impl_->destroy_consumers(RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

source_statistics source::statistics() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->stats;
}

}  // namespace seqinbox::kafka
