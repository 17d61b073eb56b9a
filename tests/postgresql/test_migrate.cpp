// The migration runner: empty to latest, idempotence, concurrent runners, refusals, the upgrade
// path across the claim table with historical duplicates, connection errors.
#define BOOST_TEST_MODULE seqinbox postgresql migrate
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <numeric>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/error.hpp"

namespace pg = seqinbox::postgresql;
using seqinbox::error;
using seqinbox::error_category;
using seqinbox::test::pg_server;

namespace {

std::vector<int> versions(int from, int to) {
    std::vector<int> v(static_cast<std::size_t>(std::max(0, to - from + 1)));
    std::iota(v.begin(), v.end(), from);
    return v;
}

bool is_category(const error& e, error_category c) { return e.category() == c; }

}  // namespace

BOOST_AUTO_TEST_CASE(embedded_scripts_are_numbered_and_checksummed) {
    const auto scripts = pg::schema_scripts();
    BOOST_REQUIRE(!scripts.empty());
    for (std::size_t i = 0; i < scripts.size(); ++i) {
        BOOST_TEST(scripts[i].version == static_cast<int>(i + 1));
        BOOST_TEST(scripts[i].sha256.size() == 64u);
        BOOST_TEST(!scripts[i].sql.empty());
    }
    BOOST_TEST(pg::latest_schema_version() == static_cast<int>(scripts.size()));
    // the claim table comes in its own, later script, so upgrading is a real path
    BOOST_TEST(seqinbox::test::claim_table_version() > 1);
}

BOOST_AUTO_TEST_CASE(redacts_passwords) {
    BOOST_TEST(pg::redact_conninfo("host=h password=secret user=u") == "user=u password=*** host=h");
    BOOST_TEST(pg::redact_conninfo("postgresql://u:secret@h:5432/db") == "user=u password=*** dbname=db host=h port=5432");
    BOOST_TEST(pg::redact_conninfo("host=h user=u") == "user=u host=h");
    BOOST_TEST(pg::redact_conninfo("host=h application_name='my app'") == "host=h application_name='my app'");
}

/// Every secret option libpq marks as such ('*'), in both forms, however the value is written;
/// the other options are still shown. The secret's parts are Pw1, Pw2, Pw3.
BOOST_AUTO_TEST_CASE(redacts_every_secret_option_in_both_forms) {
    for (const std::string conninfo : {
             "host=h password=Pw1 user=u",
             "host=h password = 'Pw1 Pw2\\'Pw3' user=u",
             "host=h sslpassword=Pw1 user=u",
             "host=h sslpassword='Pw1 Pw2' password='Pw3' user=u",
             "postgresql://u:Pw1@h:5432/db",
             "postgres://h/db?user=u&password=Pw1&sslmode=disable",
             "postgres://h/db?user=u&sslpassword=Pw1&sslmode=disable",
             "postgresql://u:Pw1?Pw2@h/db",          // libpq reads 'Pw1?Pw2' as the password
             "postgresql://u:Pw1?Pw2=Pw3@h/db",
             "postgresql://u:Pw1@h/db?sslpassword=Pw2",
         }) {
        const std::string shown = pg::redact_conninfo(conninfo);
        for (const char* part : {"Pw1", "Pw2", "Pw3"}) BOOST_TEST(shown.find(part) == std::string::npos, conninfo << " -> " << shown);
        BOOST_TEST(shown.find("host=h") != std::string::npos, conninfo << " -> " << shown);
        BOOST_TEST(shown.find("=***") != std::string::npos, conninfo << " -> " << shown);
    }
}

/// A URI whose password holds an unencoded '/' or '@' puts parts of it into the host, port or
/// database name, and one that does not parse puts them into libpq's complaint: nothing is shown.
BOOST_AUTO_TEST_CASE(withholds_a_connection_string_that_does_not_parse_unambiguously) {
    for (const std::string conninfo : {
             "postgresql://u:Pw1/Pw2@h/db",          // libpq: host u, port Pw1, dbname Pw2@h/db
             "postgresql://u:Pw1/Pw2:Pw3@h/db",
             "postgresql://u:Pw1@Pw2@h/db",          // libpq: password Pw1, host Pw2@h
             "postgresql://u:Pw1/Pw2?Pw3@h/db",      // libpq: an invalid query parameter quoting Pw3
             "postgresql://u:Pw1%zzPw2@h/db",        // libpq: an invalid percent-encoding quoting Pw1
             "host=h password=Pw1 Pw2 user=u",       // libpq: missing "=" after "Pw2"
             "host=h password='Pw1 Pw2",
         }) {
        const std::string shown = pg::redact_conninfo(conninfo);
        for (const char* part : {"Pw1", "Pw2", "Pw3"}) BOOST_TEST(shown.find(part) == std::string::npos, conninfo << " -> " << shown);
        BOOST_TEST(shown.find("withheld") != std::string::npos, conninfo << " -> " << shown);
        try {
            pg::migrate(conninfo);
            BOOST_FAIL("migrated " << conninfo);
        } catch (const error& e) {
            const std::string text = e.what();
            for (const char* part : {"Pw1", "Pw2", "Pw3"}) BOOST_TEST(text.find(part) == std::string::npos, text);
            BOOST_TEST(text.find("percent-encode") != std::string::npos, text);
            BOOST_TEST(to_string(e.category()) == "connection", text);
        }
    }
}

BOOST_AUTO_TEST_CASE(empty_database_to_latest) {
    const auto conninfo = pg_server::shared().create_database();
    const auto report = pg::migrate(conninfo);
    BOOST_TEST(report.applied == versions(1, pg::latest_schema_version()), boost::test_tools::per_element());
    BOOST_TEST(report.already_applied.empty());
    BOOST_TEST(report.schema_version == pg::latest_schema_version());

    soci::session s(soci::postgresql, conninfo);
    for (const char* table : {"sequence_instance", "sequenced_message", "sequential_inbox_idempotence", "seqinbox_schema_history"})
        BOOST_TEST(seqinbox::test::table_exists(s, table), table);
    // a stored record's headers are a column of its row (V6), not rows of their own
    BOOST_TEST(!seqinbox::test::table_exists(s, "sequenced_message_header"));
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'sequenced_message'"
                                        " AND column_name = 'record_headers'") == 1);
    // the history records every script with the embedded checksum
    for (const auto& script : pg::schema_scripts()) {
        std::string checksum;
        s << "SELECT checksum FROM seqinbox_schema_history WHERE version = :v", soci::use(script.version),
            soci::into(checksum);
        BOOST_TEST(checksum == std::string(script.sha256));
    }
    // the idempotence index of sequenced_message stays non-unique (historical duplicates)
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_index WHERE indrelid = 'sequenced_message'::regclass"
                                        " AND indisunique AND NOT indisprimary") == 0);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = "
                                        "'sequenced_message_idempotence_id'") == 1);
    // the claim table exactly as in the design note
    BOOST_TEST(seqinbox::test::count(
                   s, "SELECT count(*) FROM pg_constraint WHERE conname = 'sequential_inbox_idempotence_pkey'"
                      " AND contype = 'p' AND pg_get_constraintdef(oid) = 'PRIMARY KEY (message_type, idempotence_id)'") == 1);
    BOOST_TEST(seqinbox::test::count(
                   s, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sequential_inbox_idempotence'::regclass"
                      " AND contype = 'f' AND confdeltype = 'c'") == 1);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = "
                                        "'sequential_inbox_idempotence_sequence_instance_id'") == 1);
    // one instance per (name, context id)
    seqinbox::test::create_instance(s, "orders", "o-1");
    BOOST_CHECK_THROW(seqinbox::test::create_instance(s, "orders", "o-1"), soci::soci_error);
}

/// How many valid indexes of sequence_instance are named `name`.
long long valid_instance_indexes(soci::session& s, const std::string& name) {
    return seqinbox::test::count(s, "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                                    " WHERE i.indrelid = 'sequence_instance'::regclass AND i.indisvalid AND c.relname = '" + name + "'");
}

BOOST_AUTO_TEST_CASE(housekeeping_indexes_are_partial_and_valid) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    soci::session s(soci::postgresql, conninfo);
    for (const char* index : {"sequence_instance_closed_window", "sequence_instance_unmarked", "sequence_instance_marked"})
        BOOST_TEST(valid_instance_indexes(s, index) == 1, index);
    BOOST_TEST(valid_instance_indexes(s, "sequence_instance_remove_after") == 0);  // replaced by sequence_instance_marked
    BOOST_TEST(valid_instance_indexes(s, "sequence_instance_closed") == 0);        // replaced by sequence_instance_closed_window (V8)
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indisvalid"
                                        " AND c.relname = 'sequenced_message_waiting' AND pg_get_expr(i.indpred, i.indrelid) LIKE '%WAITING%'") == 1);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = 'sequence_instance_unmarked' AND indexdef LIKE"
                                        " '%(retain_until, id) WHERE ((state = ''OPEN''::text) AND (remove_after IS NULL))'") == 1);
}

// And V10's check of an instance's pending action, added NOT VALID, is validated by V11.
BOOST_AUTO_TEST_CASE(numbered_sequence_indexes_are_partial_and_valid) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    soci::session s(soci::postgresql, conninfo);
    for (const std::string index : {"sequenced_message_processed_number", "sequenced_message_waiting_number",
                                    "sequenced_message_waiting_number_since"})
        BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indisvalid"
                                            " AND c.relname = '" + index + "' AND pg_get_expr(i.indpred, i.indrelid)"
                                            " LIKE '%sequence_number IS NOT NULL%'") == 1, index);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_constraint WHERE conname = 'sequence_instance_pending_action_check'"
                                        " AND convalidated AND pg_get_constraintdef(oid) LIKE '%SKIP_GAP%'") == 1);
}

// V10 keeps V6's signatures for the processes of the previous version still running while the
// schema is upgraded: they go on storing rows, without a number; rows stored before keep none.
BOOST_AUTO_TEST_CASE(the_store_functions_of_the_previous_version_still_store_rows_without_a_number) {
    const auto conninfo = pg_server::shared().create_database();
    const int numbered = 10;
    pg::migrate(conninfo, {.target_version = numbered - 1});
    soci::session s(soci::postgresql, conninfo);
    const auto instance = std::to_string(seqinbox::test::create_instance(s, "orders", "o-1"));
    const std::string store_one = "SELECT seqinbox_store_message(" + instance +
                                  ", 'OrderCreated', :id, 'PROCESSED', now(), now(), false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '')";
    std::string outcome;
    const std::string before = "before", after = "after";  // named: SOCI reads a bound value at the statement's end
    s << store_one, soci::use(before), soci::into(outcome);
    pg::migrate(conninfo);
    s << store_one, soci::use(after), soci::into(outcome);
    BOOST_TEST(outcome == "INSERTED");
    s << "SELECT seqinbox_store_messages(ARRAY[CAST(" + instance + " AS bigint)], ARRAY['OrderCreated'], ARRAY['many'], ARRAY['PROCESSED'],"
         " ARRAY[CAST(0 AS bigint)], ARRAY[CAST(0 AS bigint)], ARRAY[false], ARRAY[CAST(NULL AS text)], ARRAY[CAST(NULL AS text)],"
         " ARRAY[CAST(NULL AS integer)], ARRAY[CAST(NULL AS bigint)], ARRAY[CAST(NULL AS text)], ARRAY[CAST(NULL AS text)],"
         " ARRAY[CAST(NULL AS text)], ARRAY[CAST(0 AS bigint)], ARRAY[''])";
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM sequenced_message WHERE sequence_number IS NULL") == 3);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM sequence_instance WHERE skipped_through IS NULL") == 1);
}

BOOST_AUTO_TEST_CASE(the_index_script_runs_again_after_stopping_halfway) {
    // V7 runs outside a transaction (CREATE INDEX CONCURRENTLY): a migration stopped after its
    // first index leaves that index behind without a history row; the next run completes it.
    const auto conninfo = pg_server::shared().create_database();
    const int indexes = 7;
    pg::migrate(conninfo, {.target_version = indexes - 1});
    soci::session s(soci::postgresql, conninfo);
    s << "CREATE INDEX sequence_instance_closed ON sequence_instance (created_at)";  // as left by a stopped run, or worse
    const auto report = pg::migrate(conninfo, {.target_version = indexes});  // V8 drops this index
    BOOST_TEST(report.applied == versions(indexes, indexes), boost::test_tools::per_element());
    BOOST_TEST(valid_instance_indexes(s, "sequence_instance_closed") == 1);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM pg_indexes WHERE indexname = 'sequence_instance_closed'"
                                        " AND indexdef LIKE '%(id) WHERE (state = ''CLOSED''::text)'") == 1);
}

BOOST_AUTO_TEST_CASE(second_run_applies_nothing) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    const auto report = pg::migrate(conninfo);
    BOOST_TEST(report.applied.empty());
    BOOST_TEST(report.already_applied == versions(1, pg::latest_schema_version()), boost::test_tools::per_element());
    BOOST_TEST(report.schema_version == pg::latest_schema_version());
}

BOOST_AUTO_TEST_CASE(concurrent_runners_apply_each_script_once) {
    const auto conninfo = pg_server::shared().create_database();
    std::vector<std::future<pg::migrate_report>> runners;
    for (int i = 0; i < 4; ++i) runners.push_back(std::async(std::launch::async, [&] { return pg::migrate(conninfo); }));
    std::map<int, int> applied;  // version -> how many runners applied it
    for (auto& runner : runners) {
        const auto report = runner.get();  // rethrows a runner's error
        BOOST_TEST(report.schema_version == pg::latest_schema_version());
        for (int v : report.applied) ++applied[v];
    }
    for (int v : versions(1, pg::latest_schema_version())) BOOST_TEST(applied[v] == 1, "V" << v);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM seqinbox_schema_history") == pg::latest_schema_version());
}

BOOST_AUTO_TEST_CASE(waits_for_another_migrator_then_gives_up_retryably) {
    const auto conninfo = pg_server::shared().create_database();
    soci::session other(soci::postgresql, conninfo);
    other << "SELECT pg_advisory_lock(x'736571696e626f78'::bigint)";  // the migrators' lock key
    BOOST_CHECK_EXCEPTION(pg::migrate(conninfo, {.lock_wait = std::chrono::milliseconds(200)}), error,
                          [](const error& e) { return is_category(e, error_category::retryable) && e.sqlstate() == "55P03"; });
    other << "SELECT pg_advisory_unlock_all()";
    BOOST_TEST(pg::migrate(conninfo).schema_version == pg::latest_schema_version());
}

BOOST_AUTO_TEST_CASE(changed_script_is_refused) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo, {.target_version = 1});
    {
        soci::session s(soci::postgresql, conninfo);
        s << "UPDATE seqinbox_schema_history SET checksum = repeat('0', 64) WHERE version = 1";
    }
    try {
        pg::migrate(conninfo);
        BOOST_FAIL("a database with a changed script was migrated");
    } catch (const error& e) {
        BOOST_TEST(is_category(e, error_category::schema_mismatch));
        const std::string text = e.what();
        BOOST_TEST(text.find("V1__") != std::string::npos, text);
        BOOST_TEST(text.find("must never change") != std::string::npos, text);
    }
    // refused before anything was applied
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(!seqinbox::test::table_exists(s, "sequential_inbox_idempotence"));
}

BOOST_AUTO_TEST_CASE(a_failing_script_is_named_with_the_servers_error) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo, {.target_version = 7});
    {
        soci::session s(soci::postgresql, conninfo);
        s << "CREATE TABLE sequenced_message_waiting (i integer)";  // V8 drops and makes an index of that name
    }
    try {
        pg::migrate(conninfo);
        BOOST_FAIL("V8 was applied over a table of its index's name");
    } catch (const error& e) {
        const std::string text = e.what();
        BOOST_TEST(text.find("applying schema script V8__") != std::string::npos, text);
        BOOST_TEST(e.sqlstate() == "42809", text);
    }
}

BOOST_AUTO_TEST_CASE(newer_database_is_refused) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    const int newer = pg::latest_schema_version() + 1;
    {
        soci::session s(soci::postgresql, conninfo);
        s << "INSERT INTO seqinbox_schema_history (version, name, checksum) VALUES (:v, 'from_the_future', 'x')",
            soci::use(newer);
    }
    try {
        pg::migrate(conninfo);
        BOOST_FAIL("a newer database was accepted");
    } catch (const error& e) {
        BOOST_TEST(is_category(e, error_category::schema_mismatch));
        const std::string text = e.what();
        BOOST_TEST(text.find("version " + std::to_string(newer)) != std::string::npos, text);
        BOOST_TEST(text.find("upgrade seqinbox") != std::string::npos, text);
    }
}

BOOST_AUTO_TEST_CASE(target_version_outside_the_known_range_is_misuse) {
    const auto conninfo = pg_server::shared().create_database();
    BOOST_CHECK_EXCEPTION(pg::migrate(conninfo, {.target_version = pg::latest_schema_version() + 1}), error,
                          [](const error& e) { return is_category(e, error_category::misuse); });
    BOOST_CHECK_EXCEPTION(pg::migrate(conninfo, {.target_version = -1}), error,
                          [](const error& e) { return is_category(e, error_category::misuse); });
}

BOOST_AUTO_TEST_CASE(upgrade_across_the_claim_table_keeps_historical_duplicates) {
    const auto conninfo = pg_server::shared().create_database();
    const int before = seqinbox::test::claim_table_version() - 1;
    const auto first = pg::migrate(conninfo, {.target_version = before});
    BOOST_TEST(first.applied == versions(1, before), boost::test_tools::per_element());
    BOOST_TEST(first.schema_version == before);

    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(!seqinbox::test::table_exists(s, "sequential_inbox_idempotence"));
    // what the check-then-insert era could leave behind: the same logical message stored twice
    const long long instance = seqinbox::test::create_instance(s, "orders", "o-42");
    for (int i = 0; i < 2; ++i)
        s << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
             " state_changed_at) VALUES (:i, 'OrderCreated', 'dup-1', 'PROCESSED', now(), now())",
            soci::use(instance);

    const auto upgrade = pg::migrate(conninfo);
    BOOST_TEST(upgrade.applied == versions(before + 1, pg::latest_schema_version()), boost::test_tools::per_element());
    BOOST_TEST(upgrade.already_applied == versions(1, before), boost::test_tools::per_element());
    BOOST_TEST(seqinbox::test::table_exists(s, "sequential_inbox_idempotence"));
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM sequenced_message WHERE message_type = 'OrderCreated'"
                                        " AND idempotence_id = 'dup-1'") == 2);
}

BOOST_AUTO_TEST_CASE(wrong_conninfo_is_a_clear_connection_error) {
    // a port where nothing listens, with a password that must not be echoed
    pg_server& server = pg_server::shared();
    const std::string conninfo = "host=127.0.0.1 port=1 dbname=nowhere user=postgres password=hunter2 connect_timeout=5";
    try {
        pg::migrate(conninfo);
        BOOST_FAIL("connected to nothing");
    } catch (const error& e) {
        BOOST_TEST(is_category(e, error_category::connection));
        const std::string text = e.what();
        BOOST_TEST(text.find("dbname=nowhere host=127.0.0.1 port=1") != std::string::npos, text);  // libpq's order
        BOOST_TEST(text.find("password=***") != std::string::npos, text);
        BOOST_TEST(text.find("hunter2") == std::string::npos, text);
        BOOST_TEST(text.find("check the connection string") != std::string::npos, text);
    }
    // a database that does not exist on a running server
    BOOST_CHECK_EXCEPTION(pg::migrate(server.conninfo("no_such_database")), error,
                          [](const error& e) { return is_category(e, error_category::connection); });
    // not a connection string at all
    BOOST_CHECK_EXCEPTION(pg::migrate("this is not a conninfo"), error,
                          [](const error& e) { return is_category(e, error_category::connection); });
}

BOOST_AUTO_TEST_CASE(server_down_is_a_clear_connection_error) {
    pg_server server;  // its own server, stopped below
    const auto conninfo = server.create_database();
    server.stop();
    try {
        pg::migrate(conninfo);
        BOOST_FAIL("migrated on a stopped server");
    } catch (const error& e) {
        BOOST_TEST(is_category(e, error_category::connection));
        const std::string text = e.what();
        BOOST_TEST(text.find("port=" + std::to_string(server.port())) != std::string::npos, text);
        BOOST_TEST(text.find("server is running") != std::string::npos, text);
    }
}
