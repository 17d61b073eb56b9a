// The MariaDB store's housekeeping reads at scale: what a batch costs the server when most CLOSED
// instances are still inside their deduplication window (the conformance suite checks what the
// batches find; this checks what finding it reads).
#define BOOST_TEST_MODULE mariadb housekeeping
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "mariadb_server.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace si = seqinbox;
namespace mdb = seqinbox::mariadb;
using seqinbox::test::mariadb_server;
using namespace std::chrono_literals;

namespace {

struct migrated_database {
    migrated_database() { mdb::migrate(url); }
    std::string url = mariadb_server::shared().create_database();
    soci::session admin{soci::mysql, mariadb_server::shared().soci_connect(mariadb_server::database_of(url))};
};

/// `count` CLOSED instances of `sequence` ("<prefix>n" for n = 1..count) created `created_hours_ago`
/// with a retention of `retention_hours`, closed `closed_hours_ago` (plus n milliseconds).
void insert_closed(soci::session& s, const std::string& sequence, const std::string& prefix, int count, int created_hours_ago,
                   int retention_hours, int closed_hours_ago) {
    const std::string created = "UTC_TIMESTAMP(6) - INTERVAL " + std::to_string(created_hours_ago) + " HOUR";
    s << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, closed_at)"
         " SELECT '" + sequence + "', CONCAT('" + prefix + "', seq), 'CLOSED', " + created + ", " + created + " + INTERVAL " +
             std::to_string(retention_hours) + " HOUR, UTC_TIMESTAMP(6) - INTERVAL " + std::to_string(closed_hours_ago) +
             " HOUR + INTERVAL seq * 1000 MICROSECOND FROM seq_1_to_" + std::to_string(count);
}

/// Rows and index entries the server's handlers read so far, all sessions together (the test
/// is the server's only client meanwhile).
long long rows_read(soci::session& s) {
    long long rows = 0;
    s << "SELECT SUM(variable_value) FROM information_schema.global_status WHERE variable_name IN"
         " ('HANDLER_READ_FIRST', 'HANDLER_READ_KEY', 'HANDLER_READ_LAST', 'HANDLER_READ_NEXT', 'HANDLER_READ_PREV',"
         " 'HANDLER_READ_RND', 'HANDLER_READ_RND_NEXT')",
        soci::into(rows);
    return rows;
}

std::vector<si::instance_id> ids_of(soci::session& s, const std::string& where) {
    std::vector<si::instance_id> ids(100'000);
    s << "SELECT id FROM sequence_instance WHERE " + where + " ORDER BY id", soci::into(ids);
    return ids;
}

}  // namespace

BOOST_AUTO_TEST_CASE(closed_cleanup_stops_at_the_first_instance_still_inside_its_window) {
    migrated_database db;
    insert_closed(db.admin, "OrderSequence", "young", 20'000, 30, 24, 0);  // closed just now: inside a 1 h window
    insert_closed(db.admin, "OrderSequence", "old", 5, 30, 24, 3);         // closed 3 h ago: past it
    insert_closed(db.admin, "Unlisted", "kept", 5'000, 2, 24, 1);          // its retention (24 h) not over
    const std::vector<si::deduplication_window> windows{{"OrderSequence", 1h}};
    mdb::store store({.url = db.url});
    const long long before = rows_read(db.admin);
    const long long status_read = rows_read(db.admin) - before;  // what reading the status reads
    si::scan_position after;
    const auto first = store.closed_instances(std::chrono::system_clock::now(), windows, 100, after);
    const auto second = store.closed_instances(std::chrono::system_clock::now(), windows, 100, after);
    const long long read = rows_read(db.admin) - before - 2 * status_read;
    BOOST_TEST(first == ids_of(db.admin, "context_id LIKE 'old%'"), boost::test_tools::per_element());
    BOOST_TEST(second.empty());
    BOOST_TEST_MESSAGE("two closed-cleanup batches read " << read << " rows of 25,005 CLOSED instances");
    BOOST_TEST(read < 100);  // every CLOSED instance's window end (25,000 and more) before schema V3
}

BOOST_AUTO_TEST_CASE(closed_cleanup_merges_more_groups_than_one_query_holds_in_window_order) {
    migrated_database db;
    // 150 sequences (two queries of groups), each with 4 instances past a 1 h window, closed
    // 2 h ago plus n ms: window ends interleave across sequences in (time, id) order.
    std::vector<si::deduplication_window> windows;
    for (int i = 0; i < 150; ++i) {
        insert_closed(db.admin, "S" + std::to_string(i), "c", 4, 30, 24, 2);
        windows.push_back({"S" + std::to_string(i), 1h});
    }
    std::vector<si::instance_id> expected(600);
    db.admin << "SELECT id FROM sequence_instance ORDER BY closed_at, id", soci::into(expected);
    mdb::store store({.url = db.url});
    std::vector<si::instance_id> found;
    si::scan_position after;
    for (int batch = 0; batch < 10; ++batch) {
        const auto page = store.closed_instances(std::chrono::system_clock::now(), windows, 70, after);
        found.insert(found.end(), page.begin(), page.end());
        if (page.empty()) break;
    }
    BOOST_TEST(found == expected, boost::test_tools::per_element());
}
