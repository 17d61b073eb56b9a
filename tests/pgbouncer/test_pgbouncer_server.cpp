// The throwaway PgBouncer itself, and what the store relies on it for: clients share a server
// connection transaction by transaction (pool smaller than the clients), each client keeps the
// TimeZone it SET (PgBouncer 1.18 tracks TimeZone and sets it again when it hands the server
// connection to another client: the store's `SET TIME ZONE 'UTC'` at connect holds), and the
// PgBouncer and its directory are gone with their fixture. A store not told of the pooler
// (direct mode's named prepared statements) is told to set its mode.
#define BOOST_TEST_MODULE seqinbox pgbouncer test server
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "pgbouncer_server.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"

using seqinbox::test::pg_server;
using seqinbox::test::pgbouncer_server;

namespace {

using connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;

connection connect(const std::string& conninfo) {
    connection c(PQconnectdb(conninfo.c_str()), &PQfinish);
    BOOST_REQUIRE_MESSAGE(PQstatus(c.get()) == CONNECTION_OK, PQerrorMessage(c.get()));
    return c;
}

/// The one value `sql` returns, sent as an unnamed statement of the extended protocol, as the store does.
std::string value(const connection& c, const std::string& sql) {
    const std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexecParams(c.get(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0), &PQclear);
    BOOST_REQUIRE_MESSAGE(PQresultStatus(r.get()) == PGRES_TUPLES_OK, PQresultErrorMessage(r.get()));
    return PQgetvalue(r.get(), 0, 0);
}

void run(const connection& c, const std::string& sql) {
    const std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(c.get(), sql.c_str()), &PQclear);
    BOOST_REQUIRE_MESSAGE(PQresultStatus(r.get()) == PGRES_COMMAND_OK, PQresultErrorMessage(r.get()));
}

/// Runs `deliver`, which must fail as a lost connection that names the pooler mode to set.
template <typename Deliver>
void check_told_to_set_the_pooler_mode(Deliver deliver, const std::string& sqlstate) {
    try {
        deliver();
        BOOST_FAIL("no error, where SQLSTATE " << sqlstate << " was expected");
    } catch (const seqinbox::error& e) {
        BOOST_TEST(e.sqlstate() == sqlstate, e.what());
        BOOST_TEST(to_string(e.category()) == "connection", e.what());
        BOOST_TEST(std::string(e.what()).find("--pooler transaction") != std::string::npos, e.what());
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_store_in_direct_mode_through_pgbouncer_is_told_to_set_the_pooler_mode) {
    const pgbouncer_server bouncer(pg_server::shared(), {.pool_size = 1});
    const auto direct = pg_server::shared().create_database();
    seqinbox::postgresql::migrate(direct);
    seqinbox::postgresql::store_options options;
    options.conninfo = bouncer.through(direct);
    options.pool_size = 1;
    seqinbox::postgresql::store first(options), second(options);
    BOOST_TEST(static_cast<bool>(first.try_lock_job("seqinbox.removal")));  // released at once
    // The second store prepares a statement of the same name on the one server connection.
    check_told_to_set_the_pooler_mode([&] { second.try_lock_job("seqinbox.removal"); }, "42P05");
    // Another client on that server connection drops what the first store prepared.
    run(connect(bouncer.through(direct)), "DEALLOCATE ALL");
    check_told_to_set_the_pooler_mode([&] { first.try_lock_job("seqinbox.removal"); }, "26000");
}

BOOST_AUTO_TEST_CASE(clients_share_one_server_connection_and_each_keeps_its_time_zone) {
    const pgbouncer_server bouncer(pg_server::shared(), {.pool_size = 1});
    const auto a = connect(bouncer.conninfo()), b = connect(bouncer.conninfo());
    BOOST_TEST(value(a, "SELECT CAST(pg_backend_pid() AS text)") == value(b, "SELECT CAST(pg_backend_pid() AS text)"));
    run(a, "SET TIME ZONE 'UTC'");
    run(b, "SET TIME ZONE 'America/New_York'");
    for (int round = 0; round < 3; ++round) {
        BOOST_TEST(value(a, "SELECT current_setting('TimeZone')") == "UTC");
        BOOST_TEST(value(b, "SELECT current_setting('TimeZone')") == "America/New_York");
        run(a, "BEGIN");
        BOOST_TEST(value(a, "SELECT CAST(timestamptz '2026-01-01 12:00:00+00' AS text)") == "2026-01-01 12:00:00+00");
        run(a, "COMMIT");
        BOOST_TEST(value(b, "SELECT CAST(timestamptz '2026-01-01 12:00:00+00' AS text)") == "2026-01-01 07:00:00-05");
    }
    // What PgBouncer does not track leaks from one client to the other: the store SETs it LOCAL.
    run(a, "SET lock_timeout = 1234");
    BOOST_TEST(value(b, "SHOW lock_timeout") == "1234ms");
}

BOOST_AUTO_TEST_CASE(pgbouncer_is_removed_with_its_fixture) {
    std::filesystem::path dir;
    std::string conninfo;
    {
        const pgbouncer_server bouncer(pg_server::shared());
        dir = bouncer.directory();
        conninfo = bouncer.conninfo();
        BOOST_TEST(std::filesystem::exists(dir / "pgbouncer.ini"));
        BOOST_TEST(value(connect(conninfo), "SELECT 'through'") == "through");
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    const connection refused(PQconnectdb((conninfo + " connect_timeout=5").c_str()), &PQfinish);
    BOOST_TEST(PQstatus(refused.get()) == CONNECTION_BAD);
}
