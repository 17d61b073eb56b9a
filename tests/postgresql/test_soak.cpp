// PostgreSQL soak (docs/guarantees.md under load and faults): 8 threads deliver a shuffled stream with 30 %
// duplicates while a killer terminates random backends and 2 % of first listener calls throw;
// interrupted deliveries are redelivered and failures resent until everything is handled. The
// listener writes its effect in the claim transaction (propagation::required), so at the end
// the database itself shows: every logical message handled exactly once, in declared order per
// context, one row and one claim per key, every instance closed, nothing lost.
//
// Size: `test_postgres_soak -- --deliveries-per-thread N` or SEQINBOX_SOAK_DELIVERIES_PER_THREAD
// (default 20000; the sanitizer build runs fewer).
#define BOOST_TEST_MODULE seqinbox postgresql soak
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/inbox.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/propagation/required.hpp"
#include "support/order_check.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
struct soak_policies : si::default_policies {
    using propagation = si::propagation::required;
};
using inbox_type = pg::inbox<si::memory::source, si::memory::error_sink, soak_policies>;

namespace {

constexpr int threads = 8;
constexpr double duplicate_share = 0.3;
constexpr std::size_t failure_one_in = 50;  // 2 % of logical messages fail on their first call

std::size_t deliveries_per_thread() {
    const auto& suite = boost::unit_test::framework::master_test_suite();
    for (int i = 1; i + 1 < suite.argc; ++i)
        if (std::string(suite.argv[i]) == "--deliveries-per-thread") return std::stoul(suite.argv[i + 1]);
    if (const char* size = std::getenv("SEQINBOX_SOAK_DELIVERIES_PER_THREAD")) return std::stoul(size);
    return 20'000;
}

std::vector<std::string> order_types() {
    const auto decls = si::testing::order_declarations();
    std::vector<std::string> types;
    for (const auto& m : decls.sequences.front().messages) types.push_back(m.qualified_type());
    return types;
}

/// Every logical message once, then random copies of them, all shuffled.
struct workload {
    std::size_t logical = 0;
    std::size_t contexts = 0;
    std::vector<si::envelope> deliveries;

    workload(std::size_t total, std::mt19937_64& rng) {
        const auto types = order_types();
        contexts = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(total) / (1 + duplicate_share)) / types.size());
        for (std::size_t c = 0; c < contexts; ++c)
            for (const auto& type : types) {
                const std::string context = "order-" + std::to_string(c);
                deliveries.push_back(si::testing::record(type, type + "@" + context, context));
            }
        logical = deliveries.size();
        for (std::size_t i = logical; i < total; ++i) deliveries.push_back(deliveries[rng() % logical]);
        std::shuffle(deliveries.begin(), deliveries.end(), rng);
    }
};

/// The first call of every `failure_one_in`-th logical message throws.
class failure_plan {
public:
    bool should_fail(const std::string& type, const std::string& id) {
        if (std::hash<std::string>{}(type + "/" + id) % failure_one_in != 0) return false;
        std::lock_guard lock(mutex_);
        return failed_.insert(type + "/" + id).second;
    }
    std::size_t injected() const {
        std::lock_guard lock(mutex_);
        return failed_.size();
    }

private:
    mutable std::mutex mutex_;
    std::set<std::string> failed_;
};

/// Errors thrown out of poll_once, by category; connection and retryable ones are expected.
class error_tally {
public:
    void add(const std::string& category, const std::string& text) {
        std::lock_guard lock(mutex_);
        ++by_category_[category];
        if (category != "connection" && category != "retryable") unexpected_.push_back(category + ": " + text);
    }
    std::size_t of(const std::string& category) const {
        std::lock_guard lock(mutex_);
        auto it = by_category_.find(category);
        return it == by_category_.end() ? 0 : it->second;
    }
    std::vector<std::string> unexpected() const {
        std::lock_guard lock(mutex_);
        return unexpected_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::size_t> by_category_;
    std::vector<std::string> unexpected_;
};

/// Terminates a random client backend of the database every 100-500 ms while it runs.
class killer {
public:
    killer(std::string conninfo, std::uint64_t seed)
        : thread_([this, conninfo = std::move(conninfo), seed](std::stop_token stop) { run(stop, conninfo, seed); }) {}
    std::size_t kills() const { return kills_.load(); }
    void stop() {
        thread_.request_stop();
        if (thread_.joinable()) thread_.join();
    }

private:
    void run(const std::stop_token& stop, const std::string& conninfo, std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        soci::session admin(soci::postgresql, conninfo);
        while (!stop.stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
            std::vector<int> pids(64);
            admin << "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                     " AND backend_type = 'client backend' LIMIT 64",
                soci::into(pids);
            if (pids.empty()) continue;
            int done = 0;
            admin << "SELECT CAST(pg_terminate_backend(:p) AS integer)", soci::use(pids[rng() % pids.size()]), soci::into(done);
            kills_ += static_cast<std::size_t>(done);
        }
    }

    std::atomic<std::size_t> kills_{0};
    std::jthread thread_;
};

struct soak {
    std::string conninfo = pg_server::shared().create_database();
    si::memory::source source;
    si::memory::error_sink sink;
    failure_plan failures;
    error_tally errors;
    std::size_t resent = 0;

    soak() {
        pg::migrate(conninfo);
        soci::session s(soci::postgresql, conninfo);
        s << "CREATE TABLE handled (seq bigserial PRIMARY KEY, type text NOT NULL, idempotence_id text NOT NULL,"
             " context_id text NOT NULL)";
    }

    std::unique_ptr<inbox_type> make_inbox(pg::store& store) {
        auto inbox = std::make_unique<inbox_type>(store, source, sink, si::testing::order_declarations());
        for (const auto& type : order_types())
            inbox->on(type, [this](const std::string&, const inbox_type::context& ctx) {
                if (failures.should_fail(ctx.qualified_type, ctx.idempotence_id)) throw std::runtime_error("injected failure");
                ctx.transaction->session() << "INSERT INTO handled (type, idempotence_id, context_id) VALUES (:t, :i, :c)",
                    soci::use(ctx.qualified_type), soci::use(ctx.idempotence_id), soci::use(ctx.context_id);
            });
        return inbox;
    }

    /// Every inbox polls on its own thread until the source is empty.
    void drain(std::vector<std::unique_ptr<inbox_type>>& inboxes) {
        std::vector<std::jthread> workers;
        for (auto& inbox : inboxes)
            workers.emplace_back([this, in = inbox.get()] {
                for (;;) try {
                        if (!in->poll_once()) return;
                    } catch (const si::error& e) {
                        errors.add(std::string(to_string(e.category())), e.what());
                    } catch (const std::exception& e) {
                        errors.add("other", e.what());
                    }
            });
    }

    /// Puts back interrupted deliveries and resends the failures reported since `seen`.
    std::size_t requeue(std::size_t& seen) {
        std::size_t again = source.redeliver_unacknowledged();
        const auto records = sink.records();
        for (; seen < records.size(); ++seen, ++again, ++resent) source.push(records[seen].original);
        return again;
    }
};

/// Rows of `handled` per context in commit order.
std::map<std::string, std::vector<std::string>> handled_order(soci::session& s) {
    std::map<std::string, std::vector<std::string>> order;
    std::string type, context;
    soci::statement st = (s.prepare << "SELECT type, context_id FROM handled ORDER BY seq", soci::into(type), soci::into(context));
    for (bool more = st.execute(true); more; more = st.fetch()) order[context].push_back(type);
    return order;
}

/// The rows of every key that has a row not PROCESSED, for the failure message.
std::string rows_not_processed(soci::session& s) {
    std::string text, row;
    soci::statement st = (s.prepare << "SELECT m.message_type || '/' || m.idempotence_id || ' ' || m.state || ' #' || m.id"
                                       " || ' changed ' || m.state_changed_at FROM sequenced_message m"
                                       " WHERE (m.message_type, m.idempotence_id) IN (SELECT message_type, idempotence_id"
                                       " FROM sequenced_message WHERE state <> 'PROCESSED') ORDER BY m.message_type, m.idempotence_id, m.id",
                          soci::into(row));
    for (bool more = st.execute(true); more; more = st.fetch()) text += "\n  " + row;
    return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(soak_with_duplicates_failures_and_terminated_backends) {
    soak t;
    std::mt19937_64 rng(20261130);
    const workload work(threads * deliveries_per_thread(), rng);
    for (const auto& e : work.deliveries) t.source.push(e);
    pg::store store({.conninfo = t.conninfo, .pool_size = 2 * threads + 4});
    std::vector<std::unique_ptr<inbox_type>> inboxes;
    for (int i = 0; i < threads; ++i) inboxes.push_back(t.make_inbox(store));

    const auto started = std::chrono::steady_clock::now();
    std::size_t seen = 0, rounds = 0;
    killer k(t.conninfo, rng());
    do {
        t.drain(inboxes);
    } while (t.requeue(seen) > 0 && ++rounds < 50);
    k.stop();
    while (t.requeue(seen) > 0 && ++rounds < 60) t.drain(inboxes);  // the killer's last victims
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    BOOST_TEST_MESSAGE("deliveries " << work.deliveries.size() << ", logical " << work.logical << ", contexts " << work.contexts
                                     << ", " << seconds << " s, " << static_cast<double>(work.deliveries.size()) / seconds
                                     << " deliveries/s, backends terminated " << k.kills() << ", connection errors "
                                     << t.errors.of("connection") << ", retryable " << t.errors.of("retryable")
                                     << ", injected listener failures " << t.failures.injected() << ", resent " << t.resent
                                     << ", rounds " << rounds << ", connections replaced "
                                     << store.statistics().connections_replaced);
    // the message is evaluated even when the check passes: never front() of an empty list
    const auto unexpected = t.errors.unexpected();
    BOOST_TEST(unexpected.empty(), (unexpected.empty() ? std::string() : unexpected.front()));
    BOOST_TEST(t.source.pending() == 0u);
    BOOST_TEST(t.source.in_flight() == 0u);
    BOOST_TEST(k.kills() > 0u);
    BOOST_TEST(t.failures.injected() > 0u);

    soci::session s(soci::postgresql, t.conninfo);
    // exactly once, in order
    BOOST_TEST(count(s, "SELECT count(*) FROM handled") == static_cast<long long>(work.logical));
    BOOST_TEST(count(s, "SELECT count(*) FROM (SELECT 1 FROM handled GROUP BY type, idempotence_id HAVING count(*) > 1) d") == 0);
    const auto decls = si::testing::order_declarations();
    std::size_t out_of_order = 0;
    for (const auto& [context, types] : handled_order(s))
        if (!si::testing::order_violation(decls, types).empty()) ++out_of_order;
    BOOST_TEST(out_of_order == 0u);
    // the inbox state: one PROCESSED row and one claim per key, every instance closed
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message") == static_cast<long long>(work.logical));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0, rows_not_processed(s));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence") == static_cast<long long>(work.logical));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance") == static_cast<long long>(work.contexts));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance WHERE state <> 'CLOSED'") == 0);
    // every error-sink record is an injected failure, reported at most once each
    std::size_t other_reasons = 0;
    for (const auto& r : t.sink.records())
        if (r.reason.find("injected failure") == std::string::npos) ++other_reasons;
    BOOST_TEST(other_reasons == 0u);
    BOOST_TEST(t.sink.size() <= t.failures.injected());
}
