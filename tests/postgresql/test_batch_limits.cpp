// Issue 33: the batch path under the settings users choose. A batch needs no more pooled
// connections than one delivery of its propagation; its locks and subtransactions stay bounded
// whatever its size (a server with the default max_locks_per_transaction commits 13,000 new
// keys); a store error at a listener's savepoint fails the batch with its own cause and never
// dead-letters a message; under `required` a batch still costs three round trips besides what
// its listeners send.
#define BOOST_TEST_MODULE seqinbox postgresql batch limits
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/testing.hpp"
#include "seqinbox/postgresql/inbox.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/propagation/required.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

struct required_policies : si::default_policies {
    using propagation = si::propagation::required;
};

/// What the listeners of order_inbox do with the claim transaction under `required`.
enum class effect { none, write, write_swallowing_errors };

std::ostream& operator<<(std::ostream& out, effect e) {
    return out << (e == effect::none ? "no statement" : e == effect::write ? "a write" : "a write swallowing errors");
}

/// An inbox on the order sequence whose listeners write one business row each in the claim
/// transaction (under `required`), as `listeners` says.
template <class Policies>
struct order_inbox {
    si::memory::source source;
    si::memory::error_sink sink;
    pg::inbox<si::memory::source, si::memory::error_sink, Policies> inbox;
    effect listeners = effect::write;

    explicit order_inbox(pg::store& store) : inbox(store, source, sink, si::testing::order_declarations()) {
        for (const auto& msg : inbox.declared().sequences.at(0).messages)
            inbox.on(msg.qualified_type(), [this](const si::testing::message&, const auto& ctx) {
                if (listeners == effect::none || ctx.transaction == nullptr) return;
                try {
                    ctx.transaction->session() << "INSERT INTO business_effect (idempotence_id) VALUES ('" + ctx.idempotence_id + "')";
                } catch (const std::exception&) {
                    if (listeners != effect::write_swallowing_errors) throw;
                }
            });
    }
};

std::string migrated(pg_server& server) {
    std::string conninfo = server.create_database();
    pg::migrate(conninfo);
    soci::session s(soci::postgresql, conninfo);
    s << "CREATE TABLE business_effect (idempotence_id text NOT NULL)";
    return conninfo;
}

pg::store_options options(const std::string& conninfo, std::size_t pool_size) {
    pg::store_options o;
    o.conninfo = conninfo;
    o.pool_size = pool_size;
    o.acquire_timeout = 3s;
    return o;
}

/// `n` OrderCreated records of `n` new contexts.
std::vector<si::envelope> created(int n, const std::string& prefix = "order-") {
    std::vector<si::envelope> records;
    for (int i = 0; i < n; ++i) records.push_back(si::testing::record("OrderCreated", "c-" + prefix + std::to_string(i), prefix + std::to_string(i)));
    return records;
}

}  // namespace

// Item 1: with one pooled connection per consumer thread, a batch under `required` committed
// never (it leased a second connection for its instances while its transaction held the first).
BOOST_AUTO_TEST_CASE(a_batch_under_required_needs_one_pooled_connection) {
    const std::string conninfo = migrated(pg_server::shared());
    pg::store store(options(conninfo, 1));
    order_inbox<required_policies> o(store);
    o.inbox.deliver(si::testing::record("OrderCreated", "c1", "o1"));  // one delivery works, and caches o1
    const std::vector<si::envelope> cached{si::testing::record("OrderValidated", "v1", "o1")};
    BOOST_CHECK_NO_THROW(o.inbox.deliver_batch(cached));
    BOOST_CHECK_NO_THROW(o.inbox.deliver_batch(created(3)));  // new instances too
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 5);
    BOOST_TEST(count(s, "SELECT count(*) FROM business_effect") == 5);
}

// Item 2: under `required`, each listener's savepoint and each key's store took a lock entry
// until the commit; 13,000 new keys exhausted a default server's lock table (64 x 100 entries)
// at commit, on every attempt. The store splits a batch where the server's limits require.
BOOST_AUTO_TEST_CASE(a_batch_of_thirteen_thousand_new_keys_commits_on_a_server_with_default_limits) {
    pg_server server(pg_server::commits::not_durable, pg_server::limits::server_defaults);
    const std::string conninfo = migrated(server);
    pg::store store(options(conninfo, 8));
    BOOST_TEST_MESSAGE("records per batch transaction: " << store.max_batch_records(true) << " under required, "
                                                         << store.max_batch_records(false) << " otherwise");
    BOOST_TEST(store.max_batch_records(true) >= 100u);
    {
        order_inbox<required_policies> o(store);
        const auto results = o.inbox.deliver_batch(created(13'000));
        BOOST_TEST(std::ranges::count(results, si::outcome::processed, &si::delivery_result::outcome) == 13'000);
        BOOST_TEST(o.sink.records().empty());
    }
    {
        order_inbox<si::default_policies> o(store);
        const auto results = o.inbox.deliver_batch(created(13'000, "plain-"));
        BOOST_TEST(std::ranges::count(results, si::outcome::processed, &si::delivery_result::outcome) == 13'000);
    }
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 26'000);
    BOOST_TEST(count(s, "SELECT count(*) FROM business_effect") == 13'000);
}

// Item 2: what one batch transaction holds in the lock table is bounded by max_batch_records:
// counted just before its commit.
BOOST_AUTO_TEST_CASE(a_batch_transaction_holds_no_more_locks_than_its_limit_allows) {
    const std::string conninfo = migrated(pg_server::shared());
    pg::store store(options(conninfo, 8));
    order_inbox<required_policies> o(store);
    soci::session observer(soci::postgresql, conninfo);
    long long most = 0;
    const auto count_locks = [&] {
        most = std::max(most, count(observer, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                                              " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
                                              " AND l.locktype IN ('advisory', 'transactionid')"));
    };
    const auto limit = store.max_batch_records(true);
    o.inbox.deliver_batch(created(static_cast<int>(limit) * 3), {.before_commit = count_locks});
    BOOST_TEST_MESSAGE("most advisory and transaction id locks of one batch: " << most << " (limit " << limit << " records)");
    BOOST_TEST(most > 0);
    BOOST_TEST(most <= static_cast<long long>(2 * limit + 1));
}

// Item 3: a deferred write that fails when a listener's savepoint is taken (sent with the
// listener's first statement) is a store error: the batch fails with its cause, whether the
// listener passes the error on or swallows it, and no message goes to the error sink as a
// listener failure. Without listener statements it fails at the commit, with the same cause.
BOOST_DATA_TEST_CASE(a_store_error_at_a_listeners_savepoint_fails_the_batch_with_its_own_cause,
                     boost::unit_test::data::make({effect::write, effect::write_swallowing_errors, effect::none})) {
    const std::string conninfo = migrated(pg_server::shared());
    soci::session s(soci::postgresql, conninfo);
    s << "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
         " IF NEW.idempotence_id = 'c-poison' THEN RAISE EXCEPTION 'planted store failure' USING ERRCODE = '53200',"
         " HINT = 'the planted hint'; END IF; RETURN NEW; END $$";
    s << "CREATE TRIGGER refuse_poison BEFORE INSERT ON sequenced_message FOR EACH ROW EXECUTE FUNCTION refuse_poison()";
    pg::store store(options(conninfo, 4));
    order_inbox<required_policies> o(store);
    o.listeners = sample;
    const std::vector<si::envelope> records{si::testing::record("OrderCreated", "c-poison", "o1"),
                                            si::testing::record("OrderCreated", "c-2", "o2"),
                                            si::testing::record("OrderCreated", "c-3", "o3")};
    std::string what, sqlstate;
    auto category = si::error_category::internal;
    try {
        o.inbox.deliver_batch(records);
    } catch (const si::error& e) {
        what = e.what();
        sqlstate = e.sqlstate();
        category = e.category();
    }
    BOOST_TEST_MESSAGE("the batch failed with: " << what);
    BOOST_TEST(sqlstate == "53200");
    BOOST_TEST((category == si::error_category::retryable));  // a full lock table may have room later
    BOOST_TEST(what.find("planted store failure") != std::string::npos);
    BOOST_TEST(o.sink.records().empty());
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message") == 0);
    BOOST_TEST(count(s, "SELECT count(*) FROM business_effect") == 0);
}

// Under `required`, listeners that send nothing cost nothing: their savepoints travel with the
// batch's writes, as the default propagation's batch does (BEGIN with the instances' claims, the
// writes with COMMIT, after the instances).
BOOST_AUTO_TEST_CASE(a_batch_under_required_costs_three_round_trips_besides_its_listeners_statements) {
    const std::string conninfo = migrated(pg_server::shared());
    pg::store store(options(conninfo, 4));
    order_inbox<required_policies> o(store);
    o.listeners = effect::none;
    o.inbox.deliver_batch(created(100, "warm-"));  // prepares the connection's statements
    auto before = store.statistics().round_trips;
    o.inbox.deliver_batch(created(100));
    BOOST_TEST(store.statistics().round_trips - before == 3u);
    o.listeners = effect::write;
    before = store.statistics().round_trips;
    o.inbox.deliver_batch(created(100, "writing-"));
    const auto writing = store.statistics().round_trips - before;
    BOOST_TEST_MESSAGE("a batch of 100 whose listeners write one row each: " << writing << " round trips counted by the store");
    BOOST_TEST(writing <= 3u + 100u);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM business_effect") == 100);
}

// A listener under `required` whose own statement fails and which swallows the error leaves the
// claim transaction aborted: that is its failure (its message FAILED, its savepoint undoing it),
// not the next listener's nor the store's. Before, the batch failed with 25P02 at the next
// listener's first statement, on every attempt, and one delivery with a misuse error at commit.
BOOST_AUTO_TEST_CASE(a_listener_that_swallows_its_failed_statement_fails_alone) {
    const std::string conninfo = migrated(pg_server::shared());
    soci::session s(soci::postgresql, conninfo);
    s << "CREATE UNIQUE INDEX business_effect_once ON business_effect (idempotence_id)";
    s << "INSERT INTO business_effect VALUES ('c-poison'), ('c-lone-poison')";
    pg::store store(options(conninfo, 2));
    order_inbox<required_policies> o(store);
    o.listeners = effect::write_swallowing_errors;
    const std::vector<si::envelope> records{si::testing::record("OrderCreated", "c-a", "o1"),
                                            si::testing::record("OrderCreated", "c-poison", "o2"),
                                            si::testing::record("OrderCreated", "c-b", "o3")};
    const auto results = o.inbox.deliver_batch(records);
    BOOST_TEST((results.at(0).outcome == si::outcome::processed));
    BOOST_TEST((results.at(1).outcome == si::outcome::failed));
    BOOST_TEST((results.at(2).outcome == si::outcome::processed));
    const auto lone = o.inbox.deliver(si::testing::record("OrderCreated", "c-lone-poison", "o4"));
    BOOST_TEST((lone.outcome == si::outcome::failed));
    const auto dead = o.sink.records();
    BOOST_TEST_REQUIRE(dead.size() == 2u);
    BOOST_TEST(dead.at(0).reason.find("went on") != std::string::npos, dead.at(0).reason);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 2);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'FAILED'") == 2);
    BOOST_TEST(count(s, "SELECT count(*) FROM business_effect") == 4);
}
