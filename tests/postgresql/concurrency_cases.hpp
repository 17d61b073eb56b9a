#pragma once
// The claim under real threads and many deliveries on many threads, for every route to the server
// in `routes` (a type list the including test module defines before including this header), on
// the server `concurrency_server` (defined the same way): the test_postgres_concurrency cases
// connect directly, the topology tests through PgBouncer (tests/pgbouncer/), the MariaDB ones to a
// throwaway mariadbd (tests/mariadb/). A route R gives R::store_options(direct conninfo, pool
// size), the store's options for that database, and R::server_connections, how many server
// connections the route lets the store have at once (cases needing more scale down). Observers
// and inspection connect directly. The server S gives its store type and what the cases ask of the
// server itself (tests/postgresql/concurrency_server.hpp says what).
//
// Real threads, one inbox object each (like service instances), sharing one store: the claim of
// the seed decided by the database itself. Every race is proven, not hoped for: a winner's
// listener waits until the losers are seen waiting for a lock inside the server (PostgreSQL:
// pg_locks / pg_stat_activity; MariaDB: information_schema.innodb_trx) before it decides, and a
// killed connection is killed while it holds the claim. Nothing in a worker thread calls Boost.Test (it is not thread-safe): workers report
// through return values and exceptions, checked on the main thread.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <soci/soci.h>

#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "support/world.hpp"

namespace si = seqinbox;
using si::testing::message;

namespace concurrency_cases {

using server = concurrency_server;

/// The value of a count query.
inline long long count(soci::session& session, const std::string& query) {
    long long n = 0;
    session << query, soci::into(n);
    return n;
}

using namespace std::chrono_literals;
constexpr auto patience = 30s;  // deadline of every wait for a state that must come

template <class Propagation>
struct propagation_policies : si::default_policies {
    using propagation = Propagation;
};

template <class Propagation = si::propagation::not_supported>
using server_inbox = si::basic_inbox<server::store_type, si::memory::source, si::memory::error_sink, propagation_policies<Propagation>>;

/// What one delivery on a worker thread came to: a result, or the seqinbox::error it threw.
struct attempt {
    std::optional<si::delivery_result> result;
    std::optional<si::error_category> category;
    std::string error_text;

    std::string describe() const {
        if (result) return std::string(to_string(result->outcome));
        return "error(" + std::string(category ? to_string(*category) : "not a seqinbox::error") + "): " + error_text;
    }
};

template <class Inbox>
attempt try_deliver(Inbox& inbox, const si::envelope& record) {
    try {
        return {inbox.deliver(record), {}, {}};
    } catch (const si::error& e) {
        return {{}, e.category(), e.what()};
    } catch (const std::exception& e) {
        return {{}, {}, e.what()};
    }
}

/// Polls `query` (a count) on its own session until it reaches `at_least`; throws at the deadline.
void await_count(const std::string& conninfo, const std::string& query, long long at_least, const std::string& what) {
    soci::session observer(server::backend(), server::soci_connect(conninfo));
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (count(observer, query) < at_least) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("timed out waiting until " + what);
        std::this_thread::sleep_for(2ms);
    }
}

/// Connections of this database waiting for a lock inside a claim insert.
const std::string count_claim_waiters = server::count_claim_waiters();

/// A migrated database and one store for `threads` service instances (two connections each, plus
/// spares) reaching it by `Route`, with the source and error sink they share.
struct shared_database {
    template <class Route>
    shared_database(std::size_t threads, Route)
        : conninfo(server::migrated_database()),
          store(Route::store_options(conninfo, 2 * threads + 4)),
          sql(server::backend(), server::soci_connect(conninfo)) {}

    long long rows(const std::string& where = "1 = 1") { return count(sql, "SELECT count(*) FROM sequenced_message WHERE " + where); }
    long long claims() { return count(sql, "SELECT count(*) FROM sequential_inbox_idempotence"); }
    long long instances(const std::string& state) {
        return count(sql, "SELECT count(*) FROM sequence_instance WHERE state = '" + state + "'");
    }

    std::string conninfo;  // direct
    server::store_type store;
    si::memory::source source;
    si::memory::error_sink sink;
    soci::session sql;  // main thread only
};

/// Service instances: `n` inboxes on one database. Each listener runs `hook(instance index, ctx)`
/// first, then records the call in `log` (so `log` holds only calls that completed).
template <class Propagation = si::propagation::not_supported>
struct service_instances {
    using inbox_type = server_inbox<Propagation>;
    using hook = std::function<void(std::size_t, const typename inbox_type::context&)>;

    service_instances(shared_database& db, std::size_t n, hook before = {}) {
        for (std::size_t i = 0; i < n; ++i) {
            inboxes.push_back(std::make_unique<inbox_type>(db.store, db.source, db.sink, si::testing::order_declarations()));
            for (const auto& msg : inboxes.back()->declared().sequences.at(0).messages)
                inboxes.back()->on(msg.qualified_type(), [this, i, before](const message&, const typename inbox_type::context& ctx) {
                    if (before) before(i, ctx);
                    log.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
                });
        }
    }

    /// Every instance delivers `record` on its own thread; all start at the same moment.
    std::vector<std::future<attempt>> deliver_together(const si::envelope& record) {
        start = std::make_unique<std::latch>(static_cast<std::ptrdiff_t>(inboxes.size()));
        std::vector<std::future<attempt>> results;
        for (auto& inbox : inboxes)
            results.push_back(std::async(std::launch::async, [this, in = inbox.get(), record] {
                start->arrive_and_wait();
                return try_deliver(*in, record);
            }));
        return results;
    }

    std::vector<std::unique_ptr<inbox_type>> inboxes;
    si::testing::call_log log;
    std::unique_ptr<std::latch> start;
};

std::vector<attempt> collect(std::vector<std::future<attempt>>& futures) {
    std::vector<attempt> attempts;
    for (auto& f : futures) {
        BOOST_REQUIRE_MESSAGE(f.wait_for(2 * patience) == std::future_status::ready, "a delivery never finished");
        attempts.push_back(f.get());
    }
    return attempts;
}

/// "outcome xN" for every distinct outcome or error, sorted: one string to compare.
std::string tally(const std::vector<attempt>& attempts) {
    std::map<std::string, int> n;
    for (const auto& a : attempts) ++n[a.result ? std::string(to_string(a.result->outcome)) : a.describe()];
    std::string text;
    for (const auto& [what, times] : n) text += (text.empty() ? "" : ", ") + what + " x" + std::to_string(times);
    return text;
}

const si::envelope created = si::testing::record("OrderCreated", "c-1", "order-1");
const std::string created_key = "message_type = 'OrderCreated' AND idempotence_id = 'c-1'";

}  // namespace concurrency_cases

// A named namespace, not an anonymous one: this is a header (-Wsubobject-linkage).
using namespace concurrency_cases;

BOOST_AUTO_TEST_SUITE(claim_under_real_threads)

BOOST_AUTO_TEST_CASE_TEMPLATE(simultaneous_deliveries_of_one_message_run_the_listener_once, Route, routes) {
    // 16, or as many as the route's server connections hold: the winner's T1, a T1 per loser
    // waiting for the claim, and one for the winner's state step beside T1.
    const std::size_t threads = std::min<std::size_t>(16, Route::server_connections - 1);
    shared_database db(threads, Route{});
    // The winner holds its claim until all the others are seen waiting in PostgreSQL for it.
    service_instances<> service(db, threads, [&](std::size_t, const auto&) {
        await_count(db.conninfo, count_claim_waiters, static_cast<long long>(threads) - 1, "every other claim insert waits");
    });
    auto futures = service.deliver_together(created);
    const auto attempts = collect(futures);

    BOOST_TEST(tally(attempts) == "duplicate x" + std::to_string(threads - 1) + ", processed x1");
    BOOST_TEST(service.log.count("OrderCreated", "c-1") == 1u);
    BOOST_TEST(service.log.size() == 1u);
    BOOST_TEST(db.rows(created_key) == 1);
    BOOST_TEST(db.rows(created_key + " AND state = 'PROCESSED'") == 1);
    BOOST_TEST(db.claims() == 1);
    BOOST_TEST(db.sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(winner_rolls_back_and_the_waiting_loser_takes_over, Route, routes) {
    shared_database db(2, Route{});
    std::atomic<int> calls{0};
    // First call (the winner): wait until the loser waits for its claim, then fail, which rolls
    // back T1 and with it the claim. Second call: the loser, which got the claim after all.
    service_instances<> service(db, 2, [&](std::size_t, const auto& ctx) {
        if (calls.fetch_add(1) > 0) return;
        await_count(db.conninfo, count_claim_waiters, 1, "the loser waits for the claim");
        throw std::runtime_error("boom: winner fails " + ctx.idempotence_id);
    });
    auto futures = service.deliver_together(created);
    const auto attempts = collect(futures);

    BOOST_TEST(tally(attempts) == "failed x1, processed x1");
    BOOST_TEST(calls.load() == 2);
    BOOST_TEST(service.log.size() == 1u);  // one successful listener call: the loser's
    BOOST_TEST(db.rows(created_key) == 1);  // the FAILED row, updated to PROCESSED by the loser
    BOOST_TEST(db.rows(created_key + " AND state = 'PROCESSED'") == 1);
    BOOST_TEST(db.claims() == 1);
    const auto failures = db.sink.records();
    BOOST_REQUIRE_EQUAL(failures.size(), 1u);
    BOOST_TEST(failures[0].idempotence_id == "c-1");
    BOOST_TEST(failures[0].reason.find("boom: winner fails c-1") != std::string::npos, failures[0].reason);
}

namespace concurrency_cases {

/// The first listener call (the winner's) signals that it runs, then blocks until the gate opens;
/// later calls pass through.
struct gated_first_call {
    std::atomic<int> calls{0};
    std::promise<void> entered;
    std::promise<void> gate;
    std::shared_future<void> opened = gate.get_future().share();

    void operator()() {
        if (calls.fetch_add(1) > 0) return;
        entered.set_value();
        if (opened.wait_for(2 * patience) != std::future_status::ready) throw std::runtime_error("the gate never opened");
    }
};


/// Waits for the first of `futures` to finish and returns its index.
std::size_t first_finished(std::vector<std::future<attempt>>& futures) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline)
        for (std::size_t i = 0; i < futures.size(); ++i)
            if (futures[i].wait_for(1ms) == std::future_status::ready) return i;
    BOOST_FAIL("no delivery finished");
    return 0;
}

struct kill_outcome {
    long long killed_backend;
    attempt loser;
    attempt killed;
};

/// Two deliveries of one message are under way and the winner's listener is blocked at `winner`'s
/// gate: once the loser waits for the claim, terminates the backend holding it (the winner's T1),
/// lets the loser finish while the winner is still blocked, then opens the gate.
kill_outcome kill_the_claim_holder(shared_database& db, gated_first_call& winner, std::vector<std::future<attempt>>& futures) {
    BOOST_REQUIRE(winner.entered.get_future().wait_for(patience) == std::future_status::ready);
    await_count(db.conninfo, count_claim_waiters, 1, "the loser waits for the winner's claim");
    const long long holder = server::claim_holder(db.sql);
    BOOST_TEST_REQUIRE(server::kill(db.conninfo, holder));
    const std::size_t loser = first_finished(futures);
    kill_outcome outcome{holder, futures[loser].get(), {}};
    winner.gate.set_value();
    outcome.killed = futures[1 - loser].get();
    return outcome;
}

/// The killed side threw a clear connection error; the loser took over; one row, one claim.
void expect_taken_over_after_the_kill(shared_database& db, const kill_outcome& kill) {
    BOOST_TEST(kill.loser.describe() == "processed");
    BOOST_REQUIRE_MESSAGE(kill.killed.category.has_value(), "the killed side threw no seqinbox::error: " << kill.killed.describe());
    BOOST_TEST(to_string(*kill.killed.category) == "connection");
    // the store reports the loss, or the engine when it notices before its next statement
    BOOST_TEST((kill.killed.error_text.find(server::lost_connection_text) != std::string::npos ||
                kill.killed.error_text.find("lost its connection while the listener ran") != std::string::npos),
               kill.killed.error_text);
    BOOST_TEST_MESSAGE("the killed side's error: " << kill.killed.error_text);
    BOOST_TEST(db.rows(created_key) == 1);
    BOOST_TEST(db.rows(created_key + " AND state = 'PROCESSED'") == 1);
    BOOST_TEST(db.claims() == 1);
    BOOST_TEST(db.sink.size() == 0u);
}

}  // namespace concurrency_cases
using namespace concurrency_cases;

BOOST_AUTO_TEST_CASE_TEMPLATE(winner_backend_killed_while_holding_the_claim_the_loser_takes_over, Route, routes) {
    // propagation::required: the listener writes its business row in T1, so the effect of the
    // killed winner must vanish with its claim.
    shared_database db(2, Route{});
    db.sql << "CREATE TABLE business_effect (idempotence_id " + std::string(server::text_type) + " NOT NULL, backend bigint NOT NULL)";
    gated_first_call winner;
    service_instances<si::propagation::required> service(db, 2, [&](std::size_t, const auto& ctx) {
        ctx.transaction->session() << "INSERT INTO business_effect (idempotence_id, backend) VALUES (:id, " +
                                          std::string(server::connection_id_sql) + ")",
            soci::use(ctx.idempotence_id);
        winner();
    });
    auto futures = service.deliver_together(created);
    const kill_outcome kill = kill_the_claim_holder(db, winner, futures);

    expect_taken_over_after_the_kill(db, kill);
    BOOST_TEST(winner.calls.load() == 2);
    BOOST_TEST(count(db.sql, "SELECT count(*) FROM business_effect") == 1);  // the winner's write rolled back
    BOOST_TEST(count(db.sql, "SELECT count(*) FROM business_effect WHERE backend = " + std::to_string(kill.killed_backend)) == 0);

    // The store goes on working for both instances, and the dead connection was replaced.
    for (const std::string type : {"OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"}) {
        const auto record = si::testing::record(type, type + "-1", "order-1");
        BOOST_TEST(try_deliver(*service.inboxes[0], record).describe() == "processed", type);
        BOOST_TEST(try_deliver(*service.inboxes[1], record).describe() == "duplicate", type);
    }
    BOOST_TEST(db.rows("state = 'PROCESSED'") == 5);
    BOOST_TEST(db.instances("CLOSED") == 1);
    BOOST_TEST(db.store.statistics().connections_replaced >= 1u);
}

// Under the default not_supported the engine stores PROCESSED in a transaction of its own after
// the listener returns: a winner whose T1 died during the listener must not commit a row beside
// the loser's (the engine checks T1 first).
BOOST_AUTO_TEST_CASE_TEMPLATE(winner_backend_killed_under_not_supported_leaves_one_row, Route, routes) {
    shared_database db(2, Route{});
    gated_first_call winner;
    service_instances<> service(db, 2, [&](std::size_t, const auto&) { winner(); });
    auto futures = service.deliver_together(created);
    expect_taken_over_after_the_kill(db, kill_the_claim_holder(db, winner, futures));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- many deliveries, many contexts, many threads ----

namespace concurrency_cases {

/// The first listener call of one context (types in call order) that ran before its release
/// condition was met, or "" when the order respects every declared condition.
std::string first_out_of_order(const si::declarations<message>& decls, const std::vector<std::string>& types_in_call_order) {
    std::map<std::string, const si::condition*> release_of;
    for (const auto& seq : decls.sequences)
        for (const auto& msg : seq.messages) release_of.emplace(msg.qualified_type(), &msg.release);
    std::set<std::string> done;
    for (std::size_t i = 0; i < types_in_call_order.size(); ++i) {
        const std::string& type = types_in_call_order[i];
        const auto it = release_of.find(type);
        if (it == release_of.end() || !it->second->satisfied([&](const std::string& t) { return done.contains(t); }))
            return "call #" + std::to_string(i) + " " + type;
        done.insert(type);
    }
    return {};
}

/// Counts listeners running at once per context; a second one inside the same context is an overlap.
class overlap_detector {
public:
    void enter(const std::string& context_id) {
        std::lock_guard lock(mutex_);
        if (++running_[context_id] > 1) ++overlaps_;
    }
    void leave(const std::string& context_id) {
        std::lock_guard lock(mutex_);
        --running_[context_id];
    }
    int overlaps() const {
        std::lock_guard lock(mutex_);
        return overlaps_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, int> running_;
    int overlaps_ = 0;
};

/// The workload: per context one OrderCreated and an even share of the four other types, every
/// logical message once plus duplicates making `duplicate_share` of all deliveries, shuffled.
struct workload {
    std::vector<si::envelope> logical;
    std::vector<si::envelope> deliveries;

    workload(std::size_t contexts, std::size_t total_deliveries, double duplicate_share, unsigned seed) {
        const auto logical_count = static_cast<std::size_t>(static_cast<double>(total_deliveries) * (1.0 - duplicate_share));
        const std::array<std::string, 4> later = {"OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"};
        for (std::size_t i = 0; i < logical_count; ++i) {
            const std::size_t context = i % contexts, nth = i / contexts;
            const std::string type = nth == 0 ? "OrderCreated" : later[(nth - 1) % later.size()];
            const std::string context_id = "order-" + std::to_string(context);
            logical.push_back(si::testing::record(type, context_id + "/" + std::to_string(nth), context_id));
        }
        std::mt19937 random(seed);
        deliveries = logical;
        std::uniform_int_distribution<std::size_t> any(0, logical.size() - 1);
        while (deliveries.size() < total_deliveries) deliveries.push_back(logical[any(random)]);
        std::shuffle(deliveries.begin(), deliveries.end(), random);
    }
};

struct outcome_counts {
    std::array<std::atomic<std::size_t>, 6> by_outcome{};
    std::atomic<std::size_t> released{0};

    void add(const si::delivery_result& r) {
        ++by_outcome.at(static_cast<std::size_t>(r.outcome));
        released += r.released;
    }
    std::size_t operator[](si::outcome o) const { return by_outcome.at(static_cast<std::size_t>(o)).load(); }
};

}  // namespace concurrency_cases
using namespace concurrency_cases;

namespace concurrency_cases {

/// `threads` service instances deciding a shuffled workload of 30 % duplicates from one source
/// at once; check() proves every message handled once, in the declared order, and nothing left.
template <class Route>
struct many_deliveries {
    static constexpr std::size_t threads = 8, contexts = 200, deliveries = threads * 2000;

    many_deliveries() {
        for (const auto& e : work.deliveries) db.source.push(e);
    }

    /// Runs `decide(inbox index, inbox)` on one thread per inbox until it returns.
    template <class Decide>
    void run(Decide decide) {
        const auto started = std::chrono::steady_clock::now();
        std::vector<std::thread> workers;
        for (std::size_t i = 0; i < service.inboxes.size(); ++i)
            workers.emplace_back([&, i] {
                try {
                    decide(i, *service.inboxes[i]);
                } catch (const std::exception& e) {
                    std::lock_guard lock(errors_mutex);
                    errors.emplace_back(e.what());
                }
            });
        for (auto& w : workers) w.join();
        const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        BOOST_TEST_MESSAGE(deliveries << " deliveries (" << work.logical.size() << " logical messages, " << contexts << " contexts) on "
                                      << threads << " threads in " << elapsed << " s (" << static_cast<double>(deliveries) / elapsed
                                      << " deliveries/s)");
    }

    /// `calls`: the listener calls whose decisions committed.
    void check(const si::testing::call_log& calls) {
        BOOST_TEST(errors.empty(), errors.size() << " deliveries threw, first: " << (errors.empty() ? "" : errors.front()));
        BOOST_TEST(db.source.acknowledged().size() == deliveries);
        BOOST_TEST(outcomes[si::outcome::processed] + outcomes[si::outcome::buffered] == work.logical.size());
        BOOST_TEST(outcomes[si::outcome::duplicate] == deliveries - work.logical.size());
        BOOST_TEST(outcomes.released.load() == outcomes[si::outcome::buffered]);
        BOOST_TEST(calls.size() == work.logical.size());
        for (const auto& e : work.logical) {
            const std::string id(*e.find_header("idempotence-id"));
            BOOST_TEST(calls.count(std::string(*e.find_header("message-type")), id) == 1u, id);
        }
        for (std::size_t c = 0; c < contexts; ++c) {
            const std::string context_id = "order-" + std::to_string(c);
            BOOST_TEST(first_out_of_order(service.inboxes[0]->declared(), calls.order_of(context_id)) == "", context_id);
        }
        BOOST_TEST(overlaps.overlaps() == 0);
        BOOST_TEST(db.instances("CLOSED") == static_cast<long long>(contexts));
        BOOST_TEST(db.instances("OPEN") == 0);
        BOOST_TEST(db.rows() == static_cast<long long>(work.logical.size()));
        BOOST_TEST(db.rows("state = 'PROCESSED'") == static_cast<long long>(work.logical.size()));
        BOOST_TEST(db.claims() == static_cast<long long>(work.logical.size()));
        BOOST_TEST(db.sink.size() == 0u);
    }

    const workload work{contexts, deliveries, 0.30, 20261130};
    shared_database db{threads, Route{}};
    overlap_detector overlaps;
    /// Runs before each listener call's entry in service.log, on the thread of inbox `i`.
    std::function<void(std::size_t, const service_instances<>::inbox_type::context&)> on_call;
    service_instances<> service{db, threads, [this](std::size_t i, const auto& ctx) {
                                    overlaps.enter(ctx.context_id);
                                    std::this_thread::sleep_for(50us);  // widens the window in which an overlap would be seen
                                    overlaps.leave(ctx.context_id);
                                    if (on_call) on_call(i, ctx);
                                }};
    outcome_counts outcomes;
    std::mutex errors_mutex;
    std::vector<std::string> errors;
};

}  // namespace concurrency_cases
using namespace concurrency_cases;

BOOST_AUTO_TEST_CASE_TEMPLATE(eight_threads_two_thousand_deliveries_each_exactly_once_in_declared_order, Route, routes) {
    many_deliveries<Route> m;
    m.run([&](std::size_t, auto& inbox) {
        while (auto result = inbox.poll_once()) m.outcomes.add(*result);
    });
    m.check(m.service.log);
}

// The same under batches of 50, each in one transaction: claim_batch, many contexts' instances at
// once and the pool's connections on eight threads at once (the batch path under ThreadSanitizer).
// A batch that did not commit is decided again whole; its listener calls count only once it commits.
BOOST_AUTO_TEST_CASE_TEMPLATE(eight_threads_deciding_batches_handle_each_message_once_in_declared_order, Route, routes) {
    constexpr std::size_t batch_size = 50, max_attempts = 10;
    many_deliveries<Route> m;
    std::vector<std::vector<si::testing::call_log::call>> uncommitted(m.threads);  // [i]: only inbox i's thread
    si::testing::call_log committed;
    std::atomic<std::size_t> retried{0};
    m.on_call = [&](std::size_t i, const auto& ctx) {
        uncommitted[i].push_back({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
    };
    // Under the batch's instance locks still, so that each context's calls are logged in their order.
    auto log_committed = [&](std::size_t i) {
        for (auto& call : uncommitted[i]) committed.add(std::move(call));
        uncommitted[i].clear();
    };
    m.run([&](std::size_t i, auto& inbox) {
        for (auto records = m.db.source.poll_batch(batch_size); !records.empty(); records = m.db.source.poll_batch(batch_size)) {
            for (std::size_t attempt = 1;; ++attempt) {
                try {
                    for (const auto& result : inbox.deliver_batch(records, {.before_commit = [&] { log_committed(i); }})) m.outcomes.add(result);
                    break;
                } catch (const si::error& e) {
                    uncommitted[i].clear();
                    if (e.category() != si::error_category::retryable || attempt == max_attempts) throw;
                    ++retried;
                }
            }
            for (const auto& record : records) m.db.source.acknowledge(record);
        }
    });
    BOOST_TEST_MESSAGE(retried.load() << " batches decided again after a retryable error");
    m.check(committed);
}
