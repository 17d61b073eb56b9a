// seqinbox::mariadb::migrate: applies schema/mariadb/ once (also when service instances start
// together), refuses databases it must not touch, and the store refuses a database not migrated.
#define BOOST_TEST_MODULE mariadb migrate
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "mariadb_server.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace si = seqinbox;
namespace mdb = seqinbox::mariadb;
using seqinbox::test::mariadb_server;
using namespace std::chrono_literals;

namespace {

soci::session session_on(const std::string& url) {
    return soci::session(soci::mysql, mariadb_server::shared().soci_connect(mariadb_server::database_of(url)));
}

/// The category of the seqinbox::error `work` throws ("none" without one), and its text in `text`.
template <class Work>
std::string failure_of(Work work, std::string& text) {
    try {
        work();
    } catch (const si::error& e) {
        text = e.what();
        return std::string(to_string(e.category()));
    }
    return "none";
}

}  // namespace

/// 1, 2, ... latest_schema_version().
std::vector<int> every_version() {
    std::vector<int> versions;
    for (int v = 1; v <= mdb::latest_schema_version(); ++v) versions.push_back(v);
    return versions;
}

BOOST_AUTO_TEST_CASE(a_fresh_database_is_migrated_once) {
    const auto url = mariadb_server::shared().create_database();
    const auto first = mdb::migrate(url);
    BOOST_TEST(first.applied == every_version(), boost::test_tools::per_element());
    BOOST_TEST(first.schema_version == mdb::latest_schema_version());
    const auto again = mdb::migrate(url);
    BOOST_TEST(again.applied.empty());
    BOOST_TEST(again.already_applied == every_version(), boost::test_tools::per_element());
    mdb::store store({.url = url});  // opens: the schema matches
    BOOST_TEST(store.durable_commits() == false);  // the test server runs innodb_flush_log_at_trx_commit = 0
}

BOOST_AUTO_TEST_CASE(instances_migrating_together_apply_each_script_once) {
    const auto url = mariadb_server::shared().create_database();
    std::vector<std::future<mdb::migrate_report>> runs;
    for (int i = 0; i < 4; ++i) runs.push_back(std::async(std::launch::async, [url] { return mdb::migrate(url); }));
    int applied = 0;
    for (auto& run : runs) applied += static_cast<int>(run.get().applied.size());
    BOOST_TEST(applied == mdb::latest_schema_version());
    auto s = session_on(url);
    long long rows = 0;
    s << "SELECT count(*) FROM seqinbox_schema_history", soci::into(rows);
    BOOST_TEST(rows == mdb::latest_schema_version());
}

BOOST_AUTO_TEST_CASE(a_migration_gives_up_when_another_holds_the_lock_too_long) {
    const auto url = mariadb_server::shared().create_database();
    auto other = session_on(url);
    int got = 0;
    other << "SELECT GET_LOCK('seqinbox_migration', 0)", soci::into(got);
    BOOST_TEST_REQUIRE(got == 1);
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::migrate(url, {.lock_wait = 1s}); }, text) == "retryable");
    BOOST_TEST(text.find("migration lock") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(the_store_refuses_a_database_that_was_not_migrated) {
    const auto url = mariadb_server::shared().create_database();
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::store store({.url = url}); }, text) == "schema_mismatch");
    BOOST_TEST(text.find("seqinbox migrate") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(a_changed_script_or_a_newer_database_is_refused) {
    const auto url = mariadb_server::shared().create_database();
    mdb::migrate(url);
    auto s = session_on(url);
    s << "UPDATE seqinbox_schema_history SET checksum = REPEAT('0', 64) WHERE version = 1";
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::migrate(url); }, text) == "schema_mismatch");
    BOOST_TEST(text.find("differs") != std::string::npos, text);

    const auto newer = mariadb_server::shared().create_database();
    mdb::migrate(newer);
    auto n = session_on(newer);
    n << "INSERT INTO seqinbox_schema_history (version, name, checksum) VALUES (99, 'future', REPEAT('0', 64))";
    BOOST_TEST(failure_of([&] { mdb::migrate(newer); }, text) == "schema_mismatch");
    BOOST_TEST(text.find("newer than this seqinbox library") != std::string::npos, text);
    BOOST_TEST(failure_of([&] { mdb::store store({.url = newer}); }, text) == "schema_mismatch");
}

BOOST_AUTO_TEST_CASE(a_target_outside_the_known_versions_is_misuse) {
    const auto url = mariadb_server::shared().create_database();
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::migrate(url, {.target_version = mdb::latest_schema_version() + 1}); }, text) == "misuse");
    BOOST_TEST(mdb::migrate(url, {.target_version = 0}).applied.empty());
}

// A database of schema version 1 (the first release's) takes V2's index, and the store opens it.
/// Rows of information_schema.statistics of index `name` of this database: one per column.
long long index_columns(soci::session& s, const std::string& name) {
    long long columns = 0;
    s << "SELECT count(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = :n", soci::use(name),
        soci::into(columns);
    return columns;
}

BOOST_AUTO_TEST_CASE(a_version_1_database_with_data_is_upgraded) {
    const auto url = mariadb_server::shared().create_database();
    BOOST_TEST(mdb::migrate(url, {.target_version = 1}).applied == std::vector<int>{1}, boost::test_tools::per_element());
    auto s = session_on(url);
    s << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, closed_at)"
         " VALUES ('S', 'c', 'CLOSED', '2026-01-01 00:00:00', '2026-01-02 00:00:00.5', '2026-01-01 06:00:00')";
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::store store({.url = url}); }, text) == "schema_mismatch");
    BOOST_TEST(mdb::migrate(url).applied == (std::vector<int>{2, 3, 4}), boost::test_tools::per_element());
    BOOST_TEST(index_columns(s, "sequenced_message_instance_types") == 3);  // V2
    BOOST_TEST(index_columns(s, "sequence_instance_closed_groups") == 5);   // V3
    BOOST_TEST(index_columns(s, "sequence_instance_closed_window") == 0);   // V1's, replaced by V3's
    long long retention_us = 0;
    std::string closed_key;
    s << "SELECT retention_us, CAST(closed_key AS CHAR) FROM sequence_instance", soci::into(retention_us), soci::into(closed_key);
    BOOST_TEST(retention_us == 86'400'500'000LL);  // the existing row's group and closing time
    BOOST_TEST(closed_key == "2026-01-01 06:00:00.000000");
    mdb::store store({.url = url});
}

// A database of schema version 3 with messages takes V4's columns and indexes (numbered
// sequences): its rows have no number, its instances skipped none, and they take SKIP_GAP.
BOOST_AUTO_TEST_CASE(a_version_3_database_with_messages_is_upgraded) {
    const auto url = mariadb_server::shared().create_database();
    BOOST_TEST(mdb::migrate(url, {.target_version = 3}).applied == (std::vector<int>{1, 2, 3}), boost::test_tools::per_element());
    auto s = session_on(url);
    s << "INSERT INTO sequence_instance (id, name, context_id, state, created_at, retain_until)"
         " VALUES (1, 'S', 'c', 'OPEN', '2026-01-01 00:00:00', '2026-01-02 00:00:00')";
    s << "INSERT INTO sequence_instance_lock (sequence_instance_id) VALUES (1)";
    s << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
         " VALUES (1, 'T', 'm1', 'PROCESSED', '2026-01-01 00:00:00', '2026-01-01 00:00:00')";
    BOOST_TEST(mdb::migrate(url).applied == std::vector<int>{4}, boost::test_tools::per_element());
    BOOST_TEST(index_columns(s, "sequenced_message_instance_numbers") == 3);
    BOOST_TEST(index_columns(s, "sequence_instance_name_state") == 3);
    mdb::store store({.url = url});
    auto found = store.find_message(si::claim_key{"T", "m1"});
    BOOST_TEST_REQUIRE(found.has_value());
    BOOST_TEST(!found->message.number.has_value());
    const auto skip_gap = store.request_instance_action(1, si::instance_action::skip_gap, si::timestamp{});
    BOOST_TEST(si::accepted(skip_gap), "V4's constraint takes SKIP_GAP");
    auto tx = store.begin();
    BOOST_TEST(!tx.last_released_number(1).has_value());
    tx.skip_numbers(1, 4);
    BOOST_TEST(tx.last_released_number(1).value_or(0) == 4);
}

// A server whose sessions start with autocommit off (`autocommit = 0` in its configuration): each
// script's history row is committed with it, so that a second run applies nothing again.
BOOST_AUTO_TEST_CASE(a_server_whose_sessions_start_without_autocommit_records_every_version) {
    const auto url = mariadb_server::shared().create_database();
    soci::session admin(soci::mysql, mariadb_server::shared().soci_connect());
    admin << "SET GLOBAL autocommit = 0";
    std::string text;
    const auto failure = failure_of([&] { mdb::migrate(url); }, text);
    const auto again = failure == "none" ? mdb::migrate(url).applied : std::vector<int>{-1};
    admin << "SET GLOBAL autocommit = 1";
    BOOST_TEST(failure == "none", text);
    BOOST_TEST(again.empty());
}

// A server with binary logging in statement format (binlog_format = STATEMENT; MIXED is MariaDB's
// default): InnoDB refuses to log the store's writes at READ COMMITTED (1665). A session whose user
// may choose its format logs rows; another is refused when it opens, naming the setting.
BOOST_AUTO_TEST_CASE(a_server_logging_statements_gets_row_logging_sessions_or_a_clear_refusal) {
    mariadb_server server(mariadb_server::commits::not_durable, " --log-bin --server-id=1 --binlog-format=STATEMENT");
    soci::session admin(soci::mysql, server.soci_connect());
    admin << "CREATE DATABASE inbox";
    const auto url = server.url("inbox");
    BOOST_TEST(mdb::migrate(url).applied == every_version(), boost::test_tools::per_element());  // root: BINLOG ADMIN
    {
        mdb::store store({.url = url});
        const auto now = std::chrono::system_clock::now();
        const auto instance = store.create_or_get_instance("S", "c1", now, now + 24h).id;
        auto tx = store.begin();
        BOOST_TEST(tx.claim({{"T", "k1"}, instance, now}).won);
        tx.commit();
    }
    admin << "CREATE USER 'inbox'@'127.0.0.1' IDENTIFIED BY 'pw'";
    admin << "GRANT ALL ON inbox.* TO 'inbox'@'127.0.0.1'";
    std::string text;
    const std::string user_url = "mariadb://inbox:pw@127.0.0.1:" + std::to_string(server.port()) + "/inbox";
    BOOST_TEST(failure_of([&] { mdb::store store({.url = user_url}); }, text) == "configuration");
    BOOST_TEST(text.find("binlog_format") != std::string::npos, text);
    BOOST_TEST(text.find("pw") == std::string::npos, text);
}

// A script failing halfway (here: a table of the same name, made by something else, that V1's
// foreign keys cannot reference) is named in the error.
BOOST_AUTO_TEST_CASE(a_script_that_fails_is_named_in_the_error) {
    const auto url = mariadb_server::shared().create_database();
    session_on(url) << "CREATE TABLE sequence_instance (id INT PRIMARY KEY) ENGINE = InnoDB";
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::migrate(url); }, text) != "none");
    BOOST_TEST(text.find("applying schema script mariadb/V1__inbox_tables.sql") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_a_connection_error_naming_the_redacted_url) {
    const std::string url = "mariadb://root:s3cret@127.0.0.1:" + std::to_string(seqinbox::test::unused_port()) + "/nowhere";
    std::string text;
    BOOST_TEST(failure_of([&] { mdb::migrate(url); }, text) == "connection");
    BOOST_TEST(text.find("s3cret") == std::string::npos, text);
    BOOST_TEST(text.find("mariadb://root:***@127.0.0.1") != std::string::npos, text);
}
