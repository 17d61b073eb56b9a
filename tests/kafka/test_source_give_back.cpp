// One kafka::source shared by two threads, a batch given back while a revocation of its
// partitions is under way (issue 33, item 4): the revocation waits for that batch, so giving it
// back must not wait for the revocation (it used to, until revoke_timeout).
#define BOOST_TEST_MODULE seqinbox kafka source give back
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kafka/mock_cluster.hpp"
#include "seqinbox/kafka/source.hpp"

namespace si = seqinbox;
namespace kafka = seqinbox::kafka;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr int partitions = 2;
constexpr int per_partition = 5;
constexpr std::size_t total = partitions * per_partition;
const std::string topic = "orders";
const std::string group = "give-back";

bool wait_for(const std::function<bool()>& condition, std::chrono::seconds patience) {
    const auto deadline = steady::now() + patience;
    while (!condition())
        if (steady::now() > deadline) return false;
        else std::this_thread::sleep_for(20ms);
    return true;
}

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

/// What the members polled once the batch was given back: (member, partition, offset) in order.
class received {
public:
    void add(int member, const si::envelope& r) {
        std::lock_guard lock(mutex_);
        records_.push_back({member, r.partition, r.offset});
    }
    /// Whether every record of the topic came again, whoever polled it.
    bool whole() const {
        std::lock_guard lock(mutex_);
        std::set<std::pair<std::int32_t, std::int64_t>> seen;
        for (const auto& r : records_) seen.insert({r.partition, r.offset});
        return seen.size() == total;
    }
    /// The offset each partition came again from first.
    std::map<std::int32_t, std::int64_t> first_offsets() const {
        std::lock_guard lock(mutex_);
        std::map<std::int32_t, std::int64_t> result;
        for (const auto& r : records_) result.try_emplace(r.partition, r.offset);
        return result;
    }

private:
    struct record {
        int member;
        std::int32_t partition;
        std::int64_t offset;
    };
    mutable std::mutex mutex_;
    std::vector<record> records_;
};

/// A thread polling `source` (member `member`) and acknowledging what comes; `after_poll` runs
/// after each poll.
std::jthread poller(kafka::source& source, int member, received& log, std::function<void()> after_poll = {}) {
    return std::jthread([&source, member, &log, after_poll](std::stop_token stop) {
        while (!stop.stop_requested()) {
            const auto record = source.poll();
            if (after_poll) after_poll();
            if (!record) continue;
            log.add(member, *record);
            source.acknowledge(*record);
        }
    });
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_batch_given_back_during_a_revocation_does_not_wait_for_it) {
    si::testing::mock_cluster cluster;
    cluster.create_topic(topic, partitions);
    for (std::size_t n = 0; n < total; ++n)
        cluster.produce_async(topic, si::envelope{.key = "k", .value = std::to_string(n)}, static_cast<std::int32_t>(n % partitions));
    cluster.flush();

    std::atomic<bool> armed{false}, revoking{false};
    std::atomic<steady::time_point> revoked_at{}, revoking_poll_returned{};
    auto options = [&](bool shared) {
        kafka::source_options o;
        o.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), group)}};
        o.clusters[0].consumer["partition.assignment.strategy"] = "range";  // eager: every partition is revoked
        o.revoke_timeout = 6s;
        o.batch_linger = 30s;  // the batch fills up to its max
        o.report = [&, shared](std::string_view line) {
            if (std::getenv("SEQINBOX_TEST_KAFKA_REPORT")) std::fprintf(stderr, "%s: %.*s\n", shared ? "shared" : "other", int(line.size()), line.data());
            if (shared && armed && line.starts_with("cluster '': revoked") && !revoking.exchange(true)) revoked_at = steady::now();
        };
        return o;
    };

    kafka::source shared(options(true), {{"", {topic}}});
    // Thread A (this one) takes every record in one batch and holds it.
    std::vector<si::envelope> batch;
    const auto deadline = steady::now() + 60s;
    while (batch.size() < total && steady::now() < deadline)
        for (auto& r : shared.poll_batch(total - batch.size())) batch.push_back(std::move(r));
    BOOST_TEST_REQUIRE(batch.size() == total);
    armed = true;

    // Thread B polls the same source: the revocation runs inside its poll and waits for A's batch.
    received again;
    auto b = poller(shared, 0, again, [&] {
        if (revoking && revoking_poll_returned.load() == steady::time_point{}) revoking_poll_returned = steady::now();
    });
    kafka::source other(options(false), {{"", {topic}}});  // its join revokes the shared source's partitions
    auto c = poller(other, 1, again);
    BOOST_TEST_REQUIRE(wait_for([&] { return revoking.load(); }, 60s), "the second member's join started a revocation");

    const auto start = steady::now();
    for (auto r = batch.rbegin(); r != batch.rend(); ++r) shared.redeliver(*r);  // last first, as basic_inbox::poll_batch does
    const auto given_back = steady::now();
    BOOST_TEST_REQUIRE(wait_for([&] { return revoking_poll_returned.load() != steady::time_point{}; }, 30s));
    const auto give_back_took = given_back - start, revocation_took = revoking_poll_returned.load() - revoked_at.load();
    BOOST_TEST_MESSAGE("giving back " << total << " records took " << seconds(give_back_took) << " s; the poll serving the revocation returned "
                                      << seconds(revocation_took) << " s after it started (revoke_timeout 6 s)");
    BOOST_TEST((revoking_poll_returned.load() > start), "the revocation was still waiting for the batch when it was given back");
    BOOST_TEST(seconds(give_back_took) < 2.0);
    BOOST_TEST(seconds(revocation_took) < 2.0);

    // Nothing lost: whoever owns each partition after the rebalance gets it again from offset 0
    // (nothing was committed past the records given back).
    BOOST_TEST(wait_for([&] { return again.whole(); }, 60s), "every record given back came again");
    for (const auto& [partition, offset] : again.first_offsets()) BOOST_TEST(offset == 0, "partition " << partition << " came again from " << offset);
    BOOST_TEST(shared.statistics().redelivered == total);

    b = {};
    c = {};
    shared.close();
    other.close();
}
