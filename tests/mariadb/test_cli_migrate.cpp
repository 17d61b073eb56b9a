// `seqinbox migrate` on a mariadb:// URL: the MariaDB store's migrations, once; a second run finds
// nothing to do; refusals exit 1 naming the database without its password.
#define BOOST_TEST_MODULE seqinbox mariadb cli migrate
#include <boost/test/unit_test.hpp>

#include <string>

#include "cli_runner.hpp"
#include "mariadb_server.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

using seqinbox::test::contains;
using seqinbox::test::mariadb_server;

namespace {

seqinbox::test::cli_outcome migrate(const std::string& arguments) { return seqinbox::test::run_cli("migrate " + arguments); }
std::string quote(const std::string& s) { return seqinbox::test::shell_quote(s); }

}  // namespace

BOOST_AUTO_TEST_CASE(migrates_a_mariadb_database_then_finds_nothing_to_do) {
    const auto url = mariadb_server::shared().create_database();
    const auto latest = std::to_string(seqinbox::mariadb::latest_schema_version());

    auto first = migrate("--database " + quote(url));
    BOOST_TEST(first.exit_code == 0, first.output);
    BOOST_TEST(contains(first.output, "applied: V1"), first.output);
    BOOST_TEST(contains(first.output, "schema version: " + latest + " (this build: " + latest + ")"), first.output);
    seqinbox::mariadb::store opened({.url = url});  // throws schema_mismatch unless migrated

    auto second = migrate("--postgres=" + quote(url));  // the historical flag name takes it too
    BOOST_TEST(second.exit_code == 0, second.output);
    BOOST_TEST(contains(second.output, "applied: none"), second.output);
    BOOST_TEST(contains(second.output, "already applied: V1"), second.output);
}

BOOST_AUTO_TEST_CASE(a_target_past_the_mariadb_schema_is_refused) {
    const auto url = mariadb_server::shared().create_database();
    const auto past = std::to_string(seqinbox::mariadb::latest_schema_version() + 1);
    auto refused = migrate("--database " + quote(url) + " --target " + past);
    BOOST_TEST(refused.exit_code != 0, refused.output);
    BOOST_TEST(!contains(refused.output, "applied:"), refused.output);
}

/// A URL that does not parse is refused with its syntax, never shown (any part may be a password);
/// one naming an unreachable server is named with its password as ***.
BOOST_AUTO_TEST_CASE(bad_urls_exit_1_without_their_secrets) {
    auto malformed = migrate("--database 'mariadb://inbox:Pw1@127.0.0.1:3306'");  // no database
    BOOST_TEST(malformed.exit_code == 1, malformed.output);
    BOOST_TEST(contains(malformed.output, "configuration"), malformed.output);
    BOOST_TEST(contains(malformed.output, "does not parse"), malformed.output);
    BOOST_TEST(contains(malformed.output, "mariadb://user:password@host:port/database"), malformed.output);
    BOOST_TEST(!contains(malformed.output, "Pw1"), malformed.output);

    auto unreachable = migrate("--database 'mariadb://inbox:Pw1@127.0.0.1:1/orders'");
    BOOST_TEST(unreachable.exit_code == 1, unreachable.output);
    BOOST_TEST(contains(unreachable.output, "connection"), unreachable.output);
    BOOST_TEST(contains(unreachable.output, "mariadb://inbox:***@127.0.0.1:1/orders"), unreachable.output);
    BOOST_TEST(!contains(unreachable.output, "Pw1"), unreachable.output);
}
