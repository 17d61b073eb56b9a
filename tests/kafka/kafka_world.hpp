#pragma once
// End-to-end vocabulary of the Kafka tests: an order workload (out of order, duplicated, spread
// over partitions at random), consumer threads driving inboxes, and the exactly-once-in-order
// check over what the listeners saw.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "kafka/mock_cluster.hpp"
#include "kafka/order_workload.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/kafka/source.hpp"
#include "support/order_check.hpp"
#include "support/world.hpp"

namespace seqinbox::testing {

/// Exactly once per logical message and in declared order per context.
inline void expect_once_in_order(const call_log& log, const order_workload& work) {
    const auto decls = order_declarations();
    std::map<std::pair<std::string, std::string>, int> calls;
    for (const auto& c : log.calls()) ++calls[{c.type, c.idempotence_id}];
    BOOST_TEST(calls.size() == work.logical);
    std::size_t twice = 0;
    for (const auto& [key, n] : calls) twice += n > 1 ? 1 : 0;
    BOOST_TEST(twice == 0u, twice << " logical messages handled more than once");
    std::size_t out_of_order = 0;
    for (const auto& context : work.contexts)
        if (const auto violation = order_violation(decls, log.order_of(context)); !violation.empty()) {
            if (out_of_order++ == 0) BOOST_TEST_MESSAGE(context << ": " << violation);
        }
    BOOST_TEST(out_of_order == 0u);
}

/// Whether `group` committed the end of every partition of `topic`, asked at most every 250 ms
/// (each question opens a client). Thread-safe.
class committed_watch {
public:
    committed_watch(const mock_cluster& cluster, std::string group, std::string topic, int partitions)
        : cluster_(&cluster), group_(std::move(group)), topic_(std::move(topic)), partitions_(partitions) {}

    bool reached() {
        std::lock_guard lock(mutex_);
        if (reached_ || std::chrono::steady_clock::now() < next_question_) return reached_;
        next_question_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
        reached_ = cluster_->committed(group_, topic_, partitions_) == cluster_->end_offsets(topic_, partitions_);
        return reached_;
    }

private:
    const mock_cluster* cluster_;
    std::string group_, topic_;
    int partitions_;
    std::mutex mutex_;
    bool reached_ = false;
    std::chrono::steady_clock::time_point next_question_{};
};

/// Consumer threads: `threads_per_inbox` threads per inbox call poll_once until `done()` or the
/// patience runs out; errors that mean "deliver again" (the source took the record back) are
/// counted, anything else fails the test.
class consumers {
public:
    template <class Inbox>
    void run(std::vector<Inbox*> inboxes, std::size_t threads_per_inbox, const std::function<bool()>& done,
             std::chrono::seconds patience = std::chrono::seconds(60)) {
        spin(inboxes, threads_per_inbox, done, patience);
        BOOST_TEST(unexpected().empty(), unexpected());
        BOOST_TEST_REQUIRE(done(), "the consumers did not finish within " << patience.count() << " s");
    }

    /// run() without assertions, for threads other than the test's own (Boost.Test is not
    /// thread-safe); returns done().
    template <class Inbox>
    bool spin(std::vector<Inbox*> inboxes, std::size_t threads_per_inbox, const std::function<bool()>& done,
              std::chrono::seconds patience = std::chrono::seconds(60)) {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        std::vector<std::jthread> threads;
        for (Inbox* inbox : inboxes)
            for (std::size_t t = 0; t < threads_per_inbox; ++t)
                threads.emplace_back([this, inbox, &done, deadline] {
                    while (!done() && std::chrono::steady_clock::now() < deadline) poll(*inbox);
                });
        threads.clear();
        return done();
    }

    std::size_t retried() const { return retried_.load(); }
    std::string unexpected() const {
        std::lock_guard lock(mutex_);
        return unexpected_;
    }

private:
    template <class Inbox>
    void poll(Inbox& inbox) {
        try {
            inbox.poll_once();
        } catch (const seqinbox::error& e) {
            if (e.category() == error_category::retryable || e.category() == error_category::connection) ++retried_;
            else note_unexpected(e.what());
        } catch (const std::exception& e) {
            note_unexpected(e.what());
        }
    }

    void note_unexpected(const std::string& what) {
        std::lock_guard lock(mutex_);
        if (unexpected_.empty()) unexpected_ = what;
    }

    std::atomic<std::size_t> retried_{0};
    mutable std::mutex mutex_;
    std::string unexpected_;
};

}  // namespace seqinbox::testing
