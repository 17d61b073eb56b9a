// seqinbox::postgresql::store with through = pooler::transaction, on a direct connection: nothing
// the store does may outlive a transaction (a transaction pooler lends the server connection to
// another client after it), so after single deliveries, batches, views, actions and a job lock,
// no connection of the store holds a named prepared statement or a session-level setting, and
// the store's timeouts still hold inside each transaction. tests/pgbouncer runs the store
// through a real PgBouncer.
#define BOOST_TEST_MODULE seqinbox postgresql pooler mode
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

using inbox_type = si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink>;

std::string text(soci::session& s, const std::string& query) {
    std::string value;
    s << query, soci::into(value);
    return value;
}

/// Single deliveries, a batch, the read views, an operator action and a job lock, so that every
/// kind of statement the store sends has run on its connections.
void use_every_kind_of_statement(pg::store& store) {
    si::memory::source source;
    si::memory::error_sink sink;
    inbox_type inbox(store, source, sink, si::testing::order_declarations());
    for (const auto& m : inbox.declared().sequences.front().messages) inbox.on(m.qualified_type(), [](auto&&, auto&&) {});
    for (const char* type : {"OrderValidated", "OrderCreated", "OrderPrepared"})
        inbox.deliver(si::testing::record(type, std::string(type) + "@o1", "o1"));
    std::vector<si::envelope> batch;
    for (const char* type : {"OrderShipped", "OrderCreated", "OrderValidated"}) batch.push_back(si::testing::record(type, std::string(type) + "@o2", "o2"));
    inbox.deliver_batch(batch);
    BOOST_TEST(store.instance_counts().size() == 1u);  // OPEN only: o1 and o2 wait for predecessors
    BOOST_TEST(store.message_counts().size() >= 2u);
    BOOST_TEST(store.waiting_longest(10).size() == 1u);  // o1; o2's batch left nothing waiting
    const auto o1 = store.view_instance("OrderSequence", "o1");
    BOOST_REQUIRE(o1.has_value());
    BOOST_TEST(store.view_instance(o1->instance.id).has_value());
    const auto now = std::chrono::system_clock::now();
    BOOST_TEST((store.request_instance_action(o1->instance.id, si::instance_action::close, now) == si::request_outcome::accepted));
    BOOST_TEST(store.instances_with_pending_actions(10).size() == 1u);
    auto tx = store.begin();
    BOOST_TEST(tx.pending_actions(o1->instance.id).on_instance.has_value());
    tx.commit();
    auto held = store.try_lock_job("seqinbox.expiry");
    BOOST_TEST(static_cast<bool>(held));
}

}  // namespace

BOOST_AUTO_TEST_CASE(through_a_transaction_pooler_nothing_outlives_a_transaction) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    pg::store_options o;
    o.conninfo = conninfo;
    o.pool_size = 3;
    o.idle_in_transaction_timeout = 42s;
    o.lock_timeout = 1500ms;
    o.through = pg::pooler::transaction;
    pg::store store(o);
    use_every_kind_of_statement(store);

    std::vector<pg::store::transaction> open;  // every pooled connection at once
    for (std::size_t i = 0; i < o.pool_size; ++i) open.push_back(store.begin());
    for (auto& tx : open) {
        soci::session& s = tx.session();
        BOOST_TEST(count(s, "SELECT count(*) FROM pg_prepared_statements") == 0);
        BOOST_TEST(text(s, "SELECT current_setting('lock_timeout')") == "1500ms");
        BOOST_TEST(text(s, "SELECT current_setting('idle_in_transaction_session_timeout')") == "42s");
        // After the transaction, what the next client of the server connection would see.
        s << "COMMIT";
        BOOST_TEST(text(s, "SELECT current_setting('lock_timeout')") == "0");
        BOOST_TEST(text(s, "SELECT current_setting('idle_in_transaction_session_timeout')") == "0");
        s << "BEGIN";  // for the store's own end of the transaction
    }
}

BOOST_AUTO_TEST_CASE(through_a_transaction_pooler_a_negative_idle_timeout_keeps_the_servers) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    {
        soci::session admin(soci::postgresql, conninfo);
        admin << "ALTER DATABASE " + text(admin, "SELECT current_database()") + " SET idle_in_transaction_session_timeout = '7min'";
    }
    pg::store_options o;
    o.conninfo = conninfo;
    o.pool_size = 1;
    o.idle_in_transaction_timeout = -1s;
    o.through = pg::pooler::transaction;
    pg::store store(o);
    auto tx = store.begin();
    BOOST_TEST(text(tx.session(), "SELECT current_setting('idle_in_transaction_session_timeout')") == "7min");
}
