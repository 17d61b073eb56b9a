// The upgrade path of the seed ("Existing databases must be upgradeable without mandatory cleanup
// of historical duplicates"): a database from before the claim table, holding an OPEN instance and
// two PROCESSED rows of one logical message (the race the claim fixes left them behind), is
// migrated as it is; the store then opens on it, and replaying that message is a logged
// duplicate, never a crash, while the historical rows still release successors.
#define BOOST_TEST_MODULE seqinbox postgresql upgrade replay
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/metrics/null_metrics.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;

namespace {

struct logged_policies : si::default_policies {
    using logger = si::logger::stream_logger;
};
using logged_inbox = si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink, logged_policies>;

/// Inserts one sequenced_message row as a library without the claim table wrote it: with the
/// record it came in (key, value, the two headers the decoder reads) for a replay.
void insert_historical_row(soci::session& s, long long instance, const std::string& type, const std::string& id,
                           const std::string& state) {
    long long row = 0;
    s << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at,"
         " topic, partition, \"offset\", key, value) VALUES (:i, :t, :id, :s, now() - interval '1 hour', now() - interval '1 hour',"
         " 'orders', 0, 7, convert_to('order-1', 'UTF8'), convert_to('historical', 'UTF8')) RETURNING id",
        soci::use(instance), soci::use(type), soci::use(id), soci::use(state), soci::into(row);
    s << "INSERT INTO sequenced_message_header (sequenced_message_id, position, name, value) VALUES"
         " (:r, 0, 'message-type', convert_to(:t, 'UTF8')), (:r2, 1, 'idempotence-id', convert_to(:id, 'UTF8'))",
        soci::use(row), soci::use(type), soci::use(row), soci::use(id);
}

/// A database at the last version before the claim table, with one OPEN instance of the order
/// sequence ("order-1"), two PROCESSED rows of OrderCreated/c-legacy and two WAITING rows of
/// OrderShipped/s-legacy (it waits for OrderValidated and OrderPrepared); then migrated to the
/// latest version without touching those rows.
struct upgraded_database {
    upgraded_database() : conninfo(pg_server::shared().create_database()) {
        pg::migrate(conninfo, {.target_version = seqinbox::test::claim_table_version() - 1});
        soci::session s(soci::postgresql, conninfo);
        BOOST_TEST_REQUIRE(!seqinbox::test::table_exists(s, "sequential_inbox_idempotence"));
        instance = seqinbox::test::create_instance(s, "OrderSequence", "order-1");
        for (int copy = 0; copy < 2; ++copy) {
            insert_historical_row(s, instance, "OrderCreated", "c-legacy", "PROCESSED");
            insert_historical_row(s, instance, "OrderShipped", "s-legacy", "WAITING");
        }

        const auto report = pg::migrate(conninfo);
        BOOST_TEST_REQUIRE(std::ranges::count(report.applied, seqinbox::test::claim_table_version()) == 1);
        BOOST_TEST_REQUIRE(report.schema_version == pg::latest_schema_version());
        BOOST_TEST_REQUIRE(seqinbox::test::table_exists(s, "sequential_inbox_idempotence"));
    }

    std::string conninfo;
    long long instance = 0;
};

/// The store, an inbox logging into `log_text`, and recording listeners, on the upgraded database.
struct replay_fixture : upgraded_database {
    replay_fixture() : sql(soci::postgresql, conninfo) { si::testing::record_all(inbox, calls); }

    long long rows(const std::string& type, const std::string& id, const std::string& state) {
        return count(sql, "SELECT count(*) FROM sequenced_message WHERE message_type = '" + type + "' AND idempotence_id = '" + id +
                              "' AND state = '" + state + "' AND sequence_instance_id = " + std::to_string(instance));
    }

    /// The logged lines of level `level` that mention `part`.
    std::vector<std::string> lines(const std::string& level, const std::string& part) const {
        std::istringstream in(log_text.str());
        std::vector<std::string> found;
        for (std::string line; std::getline(in, line);) {
            const std::string_view after_time = std::string_view(line).substr(line.find(' ') + 1);
            if (after_time.starts_with(level + " ") && line.find(part) != std::string::npos) found.push_back(line);
        }
        return found;
    }

    pg::store store{pg::store_options{.conninfo = conninfo, .pool_size = 4}};
    si::memory::source source;
    si::memory::error_sink sink;
    std::ostringstream log_text;
    logged_inbox inbox{store, source, sink, si::testing::order_declarations(), {.logger = si::logger::stream_logger(log_text)}};
    si::testing::call_log calls;
    soci::session sql;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(upgrade_without_cleanup, replay_fixture)

BOOST_AUTO_TEST_CASE(replaying_a_message_with_historical_duplicate_rows_is_a_logged_duplicate) {
    const auto result = inbox.deliver(si::testing::record("OrderCreated", "c-legacy", "order-1"));

    BOOST_TEST(to_string(result.outcome) == "duplicate");
    BOOST_TEST(result.context_id == "order-1");
    BOOST_TEST(calls.size() == 0u);
    BOOST_TEST(rows("OrderCreated", "c-legacy", "PROCESSED") == 2);  // no cleanup, nothing added
    BOOST_TEST(count(sql, "SELECT count(*) FROM sequenced_message") == 4);
    BOOST_TEST(sink.size() == 0u);
    const auto warnings = lines("warn", "historical rows");
    BOOST_TEST_REQUIRE(warnings.size() == 1u, "log:\n" << log_text.str());
    BOOST_TEST(warnings[0].find("OrderCreated/c-legacy") != std::string::npos, warnings[0]);
    BOOST_TEST(warnings[0].find('2') != std::string::npos, warnings[0]);  // how many rows it found

    // Replayed again (the claim may now decide), still a duplicate.
    BOOST_TEST(to_string(inbox.deliver(si::testing::record("OrderCreated", "c-legacy", "order-1")).outcome) == "duplicate");
    BOOST_TEST(calls.size() == 0u);
    BOOST_TEST(rows("OrderCreated", "c-legacy", "PROCESSED") == 2);
}

BOOST_AUTO_TEST_CASE(historical_processed_rows_release_a_successor) {
    BOOST_TEST(to_string(inbox.deliver(si::testing::record("OrderCreated", "c-legacy", "order-1")).outcome) == "duplicate");

    const auto result = inbox.deliver(si::testing::record("OrderValidated", "v-1", "order-1"));

    BOOST_TEST(to_string(result.outcome) == "processed");
    BOOST_TEST(calls.size() == 1u);
    BOOST_TEST(calls.count("OrderValidated", "v-1") == 1u);
    BOOST_TEST(rows("OrderValidated", "v-1", "PROCESSED") == 1);  // in the instance from before the upgrade
    BOOST_TEST(count(sql, "SELECT count(*) FROM sequence_instance") == 1);
    BOOST_TEST(count(sql, "SELECT count(*) FROM sequence_instance WHERE state = 'OPEN'") == 1);
    BOOST_TEST(sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_successor_counts_the_historical_rows_without_a_replay) {
    // Without replaying the historical message: the successor sees its PROCESSED rows directly.
    const auto result = inbox.deliver(si::testing::record("OrderPrepared", "p-1", "order-1"));
    BOOST_TEST(to_string(result.outcome) == "processed");
    BOOST_TEST(calls.count("OrderPrepared", "p-1") == 1u);
    BOOST_TEST(rows("OrderPrepared", "p-1", "PROCESSED") == 1);
    BOOST_TEST(lines("warn", "").empty(), "log:\n" << log_text.str());
}

// Two historical WAITING rows of one logical message: the release pass replays it once and
// gives the twin the same state.
BOOST_AUTO_TEST_CASE(historical_duplicate_waiting_rows_are_replayed_once) {
    BOOST_TEST(to_string(inbox.deliver(si::testing::record("OrderValidated", "v-1", "order-1")).outcome) == "processed");
    const auto result = inbox.deliver(si::testing::record("OrderPrepared", "p-1", "order-1"));

    BOOST_TEST(to_string(result.outcome) == "processed");
    BOOST_TEST(result.release_failures == 0u);
    BOOST_TEST(calls.count("OrderShipped", "s-legacy") == 1u);
    BOOST_TEST(rows("OrderShipped", "s-legacy", "WAITING") == 0);
    BOOST_TEST(!lines("warn", "s-legacy").empty(), "log:\n" << log_text.str());
    BOOST_TEST(sink.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// The version that moved a record's headers into its row (record_headers).
int headers_in_row_version() {
    for (const auto& script : pg::schema_scripts())
        if (script.sql.find("ADD COLUMN record_headers") != std::string_view::npos) return script.version;
    throw std::logic_error("no schema script adds sequenced_message.record_headers");
}

std::string describe(const std::vector<si::header>& headers) {
    std::string text;
    for (const auto& h : headers) {
        text += h.name + "=";
        for (const unsigned char c : h.value) text += "0123456789abcdef"[c / 16], text += "0123456789abcdef"[c % 16];
        text += ' ';
    }
    return text;
}

}  // namespace

// Header rows written before the headers moved into the message row are packed into it by the
// migration: every header replayed in its original order, names repeated, values binary
// (a NUL byte, bytes that are no UTF-8), empty, or NULL (read as empty, as before).
BOOST_AUTO_TEST_CASE(headers_stored_as_rows_are_replayed_as_they_came_after_the_migration) {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo, {.target_version = headers_in_row_version() - 1});
    long long instance = 0;
    {
        soci::session s(soci::postgresql, conninfo);
        instance = seqinbox::test::create_instance(s, "OrderSequence", "order-1");
        insert_historical_row(s, instance, "OrderShipped", "s-1", "WAITING");  // positions 0 and 1
        // Later positions inserted first: the order is the positions', not the insertion's.
        s << "INSERT INTO sequenced_message_header (sequenced_message_id, position, name, value)"
             " SELECT id, 4, 'Grüße', NULL FROM sequenced_message UNION ALL"
             " SELECT id, 3, 'bin', decode('00ff2c2e', 'hex') FROM sequenced_message UNION ALL"
             " SELECT id, 2, 'bin', ''::bytea FROM sequenced_message";
        insert_historical_row(s, instance, "OrderPrepared", "p-1", "PROCESSED");
        s << "DELETE FROM sequenced_message_header WHERE position = 1 AND sequenced_message_id ="
             " (SELECT id FROM sequenced_message WHERE idempotence_id = 'p-1')";
    }
    pg::migrate(conninfo);

    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(!seqinbox::test::table_exists(s, "sequenced_message_header"));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'p-1' AND record_headers = '"
                        "6d6573736167652d74797065.4f726465725072657061726564'") == 1);  // message-type alone
    pg::store store{pg::store_options{.conninfo = conninfo, .pool_size = 2}};
    auto tx = store.begin();
    const std::vector<std::string> types{"OrderShipped"};
    const auto waiting = tx.waiting_messages(instance, types);
    BOOST_TEST_REQUIRE(waiting.size() == 1u);
    BOOST_TEST_REQUIRE(waiting[0].payload.has_value());
    const std::vector<si::header> expected{{"message-type", "OrderShipped"}, {"idempotence-id", "s-1"}, {"bin", ""},
                                           {"bin", std::string("\0\xff,.", 4)}, {"Grüße", ""}};
    const bool as_they_came = waiting[0].payload->headers == expected;
    BOOST_TEST(as_they_came, "headers read back: " << describe(waiting[0].payload->headers));
    BOOST_TEST(waiting[0].payload->value.value_or("(null)") == "historical");
}
