#pragma once
// Private to the relay: the records given back to the Kafka source without a decision (the
// inbox threw: database down, dead-letter topic refusing, ...). Such a record comes again and
// blocks its partition until it is decided, so each one is listed in /healthz with its failed
// attempts and last error, and counted in /metrics, rather than retried silently forever.
//
// A record given back because the publications of its batch failed (refused_publication) is
// decided alone when it comes again: while any such record is undecided, the relay decides one
// record at a time, so that only the message whose publish fails becomes FAILED. So is a record
// of a batch that a full buffer rejected (overflowPolicy reject, buffer_full_sqlstate): else the
// batch, holding the rejected record before its predecessor, would be rejected forever.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "record_router.hpp"
#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/metrics/registry.hpp"

namespace seqinbox::relay::detail {

/// Thrown before a batch commits when a publication of the batch was refused or not
/// acknowledged: the batch is given back, to be decided again one record at a time.
class refused_publication : public error {
public:
    explicit refused_publication(const error& cause) : error(cause) {}
};

class retry_board {
public:
    explicit retry_board(metrics::registry& registry)
        : retries_(&registry.counter("seqinbox_delivery_retries_total",
                                     "Deliveries given back to the source without a durable decision, to come again.")),
          retrying_(&registry.gauge("seqinbox_retrying_records", "Records given back and not decided since (listed in /healthz).")) {
        retries_->inc({}, 0);  // both series exist from the start
        retrying_->set({}, 0);
    }

    /// `record` was given back after failing with `why`. `generation` counts the source's
    /// rebalances: a record last given back before one may belong to another member now.
    /// `alone`: the record is to be decided on its own when it comes again, by consumer thread
    /// `thread` (the router brings a context's records back to the thread that gave them back).
    void given_back(const envelope& record, std::string_view why, std::uint64_t generation, bool alone = false, std::size_t thread = 0) {
        const std::scoped_lock lock(mutex_);
        forget_older_than(generation);
        auto& entry = records_[position_of(record)];
        ++entry.attempts;
        entry.last_error = seqinbox::detail::loggable(why);  // one line in /healthz whatever the error's text
        entry.generation = generation;
        entry.alone = alone;
        entry.thread = thread;
        oldest_ = std::min(oldest_, generation);
        retries_->inc({});
        retrying_->set({}, static_cast<double>(records_.size()));
    }

    /// The decision for `record` is durable.
    void decided(const envelope& record, std::uint64_t generation) {
        const std::scoped_lock lock(mutex_);
        if (records_.empty()) return;  // the common case: nothing to forget
        records_.erase(position_of(record));
        forget_older_than(generation);
        retrying_->set({}, static_cast<double>(records_.size()));
    }

    /// Whether a record consumer thread `thread` gave back to be decided alone is still undecided.
    /// Per thread: one record a full buffer keeps rejecting must not slow the other threads'
    /// contexts (a review measured 6,000 records of other contexts in 29.9 s instead of 4.2 s).
    bool one_at_a_time(std::uint64_t generation, std::size_t thread = 0) {
        const std::scoped_lock lock(mutex_);
        if (records_.empty()) return false;  // the common case
        forget_older_than(generation);
        return std::ranges::any_of(records_, [&](const auto& item) { return item.second.alone && item.second.thread == thread; });
    }

    /// One line per record being retried ("" when none):
    /// `retrying orders[2]@17: 3 failed attempts, last error: ...`. Records that `undecided`
    /// rejects were decided meanwhile (another thread decided a second copy polled after a
    /// seek back) and are forgotten.
    template <class Undecided>
    std::string report(std::uint64_t generation, Undecided undecided) {
        const std::scoped_lock lock(mutex_);
        forget_older_than(generation);
        std::erase_if(records_, [&](const auto& item) { return !undecided(record_at(item.first)); });
        retrying_->set({}, static_cast<double>(records_.size()));
        std::string lines;
        for (const auto& [at, entry] : records_)
            lines += "retrying " + describe(at) + ": " + std::to_string(entry.attempts) + " failed attempt" +
                     (entry.attempts == 1 ? "" : "s") + ", last error: " + entry.last_error + "\n";
        return lines;
    }

private:
    using position = std::tuple<std::string, std::string, std::int32_t, std::int64_t>;  // cluster, topic, partition, offset

    struct entry {
        std::uint64_t attempts = 0;
        std::string last_error;
        std::uint64_t generation = 0;
        bool alone = false;
        std::size_t thread = 0;
    };

    static position position_of(const envelope& r) { return {r.cluster, r.topic, r.partition, r.offset}; }

    /// An envelope with only the origin of the record at `p`.
    static envelope record_at(const position& p) {
        envelope e;
        std::tie(e.cluster, e.topic, e.partition, e.offset) = p;
        return e;
    }

    static std::string describe(const position& at) {
        const auto& [cluster, topic, partition, offset] = at;
        return topic + "[" + std::to_string(partition) + "]@" + std::to_string(offset) +
               (cluster.empty() ? "" : " (cluster '" + cluster + "')");
    }

    /// After a rebalance a record not given back again since may have moved to another member,
    /// which then decides it: this relay would never hear of it. Walks the records only when one
    /// may be older than `generation` (a rebalance since the last walk, or a record given back
    /// by a thread that read the generation before it), not at each call: giving back or
    /// deciding a batch of n records then takes O(n log n), not O(n^2) (40,000 records: 14 s).
    void forget_older_than(std::uint64_t generation) {
        if (oldest_ >= generation) return;
        std::erase_if(records_, [generation](const auto& item) { return item.second.generation < generation; });
        oldest_ = generation;  // no record left is older
    }

    std::mutex mutex_;
    std::map<position, entry> records_;
    std::uint64_t oldest_ = 0;  ///< no record's generation is older (a lower bound)
    metrics::counter_family* retries_;  // owned by the registry, which outlives the relay's use of it
    metrics::gauge_family* retrying_;
};

/// One consumer thread's message source: the records the relay's poller routed to the thread
/// (record_router.hpp), or those of its own Kafka source when it has no router (the tests);
/// deciding and giving back go to the Kafka source, and to the retry board, which every thread
/// shares.
class watched_source {
public:
    /// How long a thread waits for the first record of its queue, and then for more.
    struct queue_waits {
        std::chrono::milliseconds first{100};
        std::chrono::milliseconds linger{5};
    };

    watched_source(kafka::source& source, retry_board& board) : source_(&source), board_(&board) {}
    /// Consumer thread `thread` (0-based) of a relay whose one Kafka source is `source`.
    watched_source(kafka::source& source, retry_board& board, record_router& router, std::size_t thread, queue_waits waits)
        : source_(&source), board_(&board), router_(&router), thread_(thread), waits_(waits) {}

    std::optional<envelope> poll() {
        if (!router_) return source_->poll();
        auto records = router_->take(thread_, 1, waits_.first, std::chrono::milliseconds(0));
        if (records.empty()) return std::nullopt;
        return std::move(records.front());
    }
    std::vector<envelope> poll_batch(std::size_t max) {
        auto records = router_ ? router_->take(thread_, max, waits_.first, waits_.linger) : source_->poll_batch(max);
        polled_at_ = std::chrono::steady_clock::now();
        return records;
    }
    /// When the last poll_batch returned (batch_timings.hpp); for the polling thread.
    std::chrono::steady_clock::time_point polled_at() const noexcept { return polled_at_; }

    void acknowledge(const envelope& record) {
        source_->acknowledge(record);
        board_->decided(record, generation());
    }

    /// The inbox gives a record back while handling the exception that stopped its delivery.
    void redeliver(const envelope& record) {
        source_->redeliver(record);
        board_->given_back(record, std::current_exception() ? current_exception_text() : "no error given", generation(),
                           to_decide_alone(), thread_);
    }

    /// Whether the relay must decide one record at a time now (see to_decide_alone).
    bool one_at_a_time() { return board_->one_at_a_time(generation(), thread_); }

    /// The records the relay is retrying.
    std::string retrying() {
        return board_->report(generation(), [this](const envelope& record) { return source_->undecided(record); });
    }

private:
    /// The relay's group member counts the rebalances: the board's generations.
    std::uint64_t generation() const { return source_->statistics().rebalances; }

    /// Whether the exception being handled gives a record back to be decided alone.
    static bool to_decide_alone() {
        try {
            if (std::current_exception()) std::rethrow_exception(std::current_exception());
        } catch (const refused_publication&) {
            return true;
        } catch (const error& e) {
            return e.category() == error_category::retryable && e.sqlstate() == buffer_full_sqlstate;
        } catch (...) {
        }
        return false;
    }

    kafka::source* source_;
    retry_board* board_;
    record_router* router_ = nullptr;
    std::size_t thread_ = 0;
    queue_waits waits_{};
    std::chrono::steady_clock::time_point polled_at_{};
};

}  // namespace seqinbox::relay::detail
