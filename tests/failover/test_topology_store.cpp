// The PostgreSQL store on the topologies of a failover, against the throwaway server (label
// topology): a server that refuses writes (a standby, SQLSTATE 25006) is a lost connection, not a
// failed message; multi-host connection strings (key=value and URI, a dead host first) reach the
// live one in the store, in migrate and in messages; and which of the store's commits wait for a
// synchronous standby.
#define BOOST_TEST_MODULE seqinbox postgresql topology store
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "support/unused_port.hpp"
#include "postgresql/pg_test_support.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

std::string dbname_of(const std::string& conninfo) {
    const auto from = conninfo.find("dbname=") + 7;
    return conninfo.substr(from, conninfo.find(' ', from) - from);
}

/// A fresh migrated database on `server`; its name.
std::string migrated_database(pg_server& server) {
    const auto conninfo = server.create_database();
    pg::migrate(conninfo);
    return dbname_of(conninfo);
}

void set_read_only(pg_server& server, const std::string& dbname, bool read_only) {
    soci::session admin(soci::postgresql, server.conninfo());
    admin << "ALTER DATABASE " + dbname + (read_only ? " SET default_transaction_read_only = on" : " RESET default_transaction_read_only");
}

pg::store_options options(const std::string& conninfo) {
    pg::store_options o;
    o.conninfo = conninfo;
    o.pool_size = 2;
    return o;
}

/// An inbox on `store` with a listener for every declared type.
struct order_inbox {
    explicit order_inbox(pg::store& store) : inbox(store, source, sink, si::testing::order_declarations()) {
        for (const auto& m : inbox.declared().sequences.front().messages) inbox.on(m.qualified_type(), [](auto&&, auto&&) {});
    }
    std::string deliver(const std::string& type, const std::string& id, const std::string& context_id) {
        return std::string(to_string(inbox.deliver(si::testing::record(type, id, context_id)).outcome));
    }
    si::memory::source source;
    si::memory::error_sink sink;
    si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink> inbox;
};

/// Whether `op` waited for a synchronous standby: its backend showed wait event SyncRep (then it
/// is cancelled, which ends the wait; the commit stays) before `op` returned. `admin` is a
/// session on the server whose synchronous standby never comes.
template <class Op>
bool waited_for_standby(soci::session& admin, Op&& op) {
    auto done = std::async(std::launch::async, std::forward<Op>(op));
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (done.wait_for(10ms) != std::future_status::ready && std::chrono::steady_clock::now() < deadline) {
        int pid = 0;
        soci::indicator found = soci::i_null;
        admin << "SELECT max(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'", soci::into(pid, found);
        if (found != soci::i_ok) continue;
        admin << "SELECT pg_cancel_backend(" + std::to_string(pid) + ")";
        done.get();
        return true;
    }
    done.get();
    return false;
}

template <class Op>
std::string category_of_failure(Op&& op) {
    try {
        op();
    } catch (const si::error& e) {
        BOOST_TEST_MESSAGE(e.what());
        return std::string(to_string(e.category())) + " " + e.sqlstate();
    }
    return "no failure";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(read_only_server)

// A connection that landed on a standby, or stayed on a primary demoted since, refuses writes
// with 25006: reconnecting (target_session_attrs=read-write) finds the primary.
BOOST_AUTO_TEST_CASE(a_write_refused_as_read_only_is_a_lost_connection_and_replaced) {
    auto& server = pg_server::shared();
    const auto dbname = migrated_database(server);
    const auto conninfo = server.conninfo(dbname);
    long long writable_instance = 0;
    {
        soci::session s(soci::postgresql, conninfo);
        writable_instance = seqinbox::test::create_instance(s, "OrderSequence", "o-0");
    }
    set_read_only(server, dbname, true);
    pg::store store(options(conninfo));  // reading the schema works on a standby
    const auto now = std::chrono::system_clock::now();
    BOOST_TEST(category_of_failure([&] { store.create_or_get_instance("OrderSequence", "o-1", now, now + 24h); }) == "connection 25006");
    {
        auto tx = store.begin();
        BOOST_TEST(category_of_failure([&] { tx.claim({{"OrderCreated", "m-1"}, writable_instance, now}); }) == "connection 25006");
        BOOST_TEST(!tx.active());
    }
    BOOST_TEST(store.statistics().connections_replaced >= 2u);
}

BOOST_AUTO_TEST_CASE(a_delivery_refused_as_read_only_is_redelivered_not_failed) {
    auto& server = pg_server::shared();
    const auto dbname = migrated_database(server);
    const auto conninfo = server.conninfo(dbname);
    set_read_only(server, dbname, true);
    pg::store store(options(conninfo));
    order_inbox orders(store);
    BOOST_TEST(category_of_failure([&] { orders.deliver("OrderCreated", "c1", "o-1"); }) == "connection 25006");
    BOOST_TEST(orders.sink.size() == 0u, "a read-only server failed the message");

    set_read_only(server, dbname, false);  // the primary is back: the same store goes on
    BOOST_TEST(orders.deliver("OrderCreated", "c1", "o-1") == "processed");
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED'") == 0);
    BOOST_TEST(orders.sink.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(multi_host_conninfo)

// libpq tries the hosts in order; the first (a port nobody listens on) refuses.
BOOST_AUTO_TEST_CASE(key_value_and_uri_forms_with_a_dead_host_first_work_in_store_and_migrate) {
    auto& server = pg_server::shared();
    const auto dead = std::to_string(seqinbox::test::unused_port());
    const auto live = std::to_string(server.port());
    for (const bool uri : {false, true}) {
        const auto dbname = dbname_of(server.create_database());
        const std::string conninfo =
            uri ? "postgresql://postgres@127.0.0.1:" + dead + ",127.0.0.1:" + live + "/" + dbname + "?target_session_attrs=read-write"
                : "host=127.0.0.1,127.0.0.1 port=" + dead + "," + live + " dbname=" + dbname +
                      " user=postgres target_session_attrs=read-write";
        BOOST_TEST_CONTEXT(conninfo) {
            BOOST_TEST(!pg::migrate(conninfo).applied.empty());
            BOOST_TEST(pg::migrate(conninfo).applied.empty());
            pg::store store(options(conninfo));
            order_inbox orders(store);
            BOOST_TEST(orders.deliver("OrderCreated", "c1", "o-1") == "processed");
            BOOST_TEST(orders.deliver("OrderValidated", "v1", "o-1") == "processed");
            const auto shown = pg::redact_conninfo(conninfo);
            BOOST_TEST(shown.find("host=127.0.0.1,127.0.0.1") != std::string::npos, shown);
            BOOST_TEST(shown.find("port=" + dead + "," + live) != std::string::npos, shown);
            BOOST_TEST(shown.find("target_session_attrs=read-write") != std::string::npos, shown);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_password_in_a_multi_host_uri_stays_out_of_messages) {
    const auto dead = std::to_string(seqinbox::test::unused_port());
    const std::string conninfo = "postgresql://postgres:s3cret@127.0.0.1:" + dead + ",127.0.0.1:" + dead + "/db?target_session_attrs=read-write";
    const auto shown = pg::redact_conninfo(conninfo);
    BOOST_TEST(shown.find("s3cret") == std::string::npos, shown);
    BOOST_TEST(shown.find("password=***") != std::string::npos, shown);
    try {
        pg::store store(options(conninfo));
        BOOST_FAIL("connected to no server");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "connection");
        BOOST_TEST(std::string(e.what()).find("s3cret") == std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("port=" + dead + "," + dead) != std::string::npos, e.what());
    }
}

// With target_session_attrs=read-write libpq skips a server that answers read-only and takes
// the next; when none is writable, connecting fails as a lost connection would.
BOOST_AUTO_TEST_CASE(only_read_only_servers_fail_to_connect_with_read_write_asked) {
    auto& server = pg_server::shared();
    const auto dbname = migrated_database(server);
    set_read_only(server, dbname, true);
    const auto live = std::to_string(server.port());
    const std::string conninfo = "host=127.0.0.1,127.0.0.1 port=" + live + "," + live + " dbname=" + dbname +
                                 " user=postgres target_session_attrs=read-write";
    BOOST_TEST(category_of_failure([&] { pg::store store(options(conninfo)); }).starts_with("connection"));
    set_read_only(server, dbname, false);
    BOOST_CHECK_NO_THROW(pg::store(options(conninfo)));
}

BOOST_AUTO_TEST_SUITE_END()

// Which commits wait for a synchronous standby (store_options::flush_every_commit): the server
// below waits for a standby that never comes, so a commit that waits shows SyncRep until it is
// cancelled. A commit that writes no WAL, or runs with synchronous_commit off, does not wait.
BOOST_AUTO_TEST_CASE(the_claim_commit_and_the_explicit_flush_wait_for_a_synchronous_standby_the_steps_before_do_not) {
    pg_server server(pg_server::commits::durable);
    const auto conninfo = server.create_database();
    pg::migrate(conninfo);
    soci::session admin(soci::postgresql, server.conninfo());
    admin << "ALTER SYSTEM SET synchronous_standby_names = 'never_connects'";  // from now on
    admin << "SELECT pg_reload_conf()";
    for (std::string names; names != "never_connects"; std::this_thread::sleep_for(10ms)) {  // the reload is asynchronous
        soci::session fresh(soci::postgresql, server.conninfo());
        fresh << "SHOW synchronous_standby_names", soci::into(names);
    }
    pg::store store(options(conninfo));
    const auto now = std::chrono::system_clock::now();
    si::sequence_instance instance;
    BOOST_TEST(!waited_for_standby(admin, [&] { instance = store.create_or_get_instance("OrderSequence", "o-1", now, now + 24h); }));
    const auto row = [&](const std::string& id) {
        si::message_record r;
        r.instance = instance.id;
        r.type = "OrderCreated";
        r.idempotence_id = id;
        r.state = si::message_state::processed;
        return r;
    };
    auto committed = store.begin();
    BOOST_TEST_REQUIRE(committed.claim({{"OrderCreated", "c-1"}, instance.id, now}).won);
    BOOST_TEST(!waited_for_standby(admin, [&] { store.store_message_beside(committed, row("c-1")); }));
    BOOST_TEST(waited_for_standby(admin, [&] { committed.commit(); }), "the claim's commit did not wait for the standby");

    auto rolled_back = store.begin();
    BOOST_TEST_REQUIRE(rolled_back.claim({{"OrderCreated", "r-1"}, instance.id, now}).won);
    BOOST_TEST(!waited_for_standby(admin, [&] { store.store_message_beside(rolled_back, row("r-1")); }));
    BOOST_TEST(waited_for_standby(admin, [&] { rolled_back.rollback(); }), "the explicit flush did not wait for the standby");

    auto o = options(conninfo);
    o.flush_every_commit = true;
    pg::store flushing(o);
    BOOST_TEST(waited_for_standby(admin, [&] { flushing.create_or_get_instance("OrderSequence", "o-2", now, now + 24h); }));
}
