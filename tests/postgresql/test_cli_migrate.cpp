// `seqinbox migrate`: exit 0 with what was applied, 1 when refused or unreachable, 2 on usage.
#define BOOST_TEST_MODULE seqinbox postgresql cli migrate
#include <boost/test/unit_test.hpp>

#include <string>

#include "cli_runner.hpp"
#include "pg_test_support.hpp"

using seqinbox::test::pg_server;

namespace {

using seqinbox::test::contains;

std::string quote(const std::string& s) { return seqinbox::test::shell_quote(s); }
seqinbox::test::cli_outcome run(const std::string& arguments) { return seqinbox::test::run_cli("migrate " + arguments); }

}  // namespace

BOOST_AUTO_TEST_CASE(migrates_then_finds_nothing_to_do) {
    const auto conninfo = pg_server::shared().create_database();
    const auto latest = std::to_string(seqinbox::postgresql::latest_schema_version());
    const auto before = std::to_string(seqinbox::test::claim_table_version() - 1);

    auto first = run("--postgres " + quote(conninfo) + " --target " + before);
    BOOST_TEST(first.exit_code == 0, first.output);
    BOOST_TEST(contains(first.output, "applied: V1"), first.output);
    BOOST_TEST(contains(first.output, "schema version: " + before), first.output);

    auto second = run("--postgres=" + quote(conninfo));
    BOOST_TEST(second.exit_code == 0, second.output);
    BOOST_TEST(contains(second.output, "applied: V" + std::to_string(seqinbox::test::claim_table_version())), second.output);
    BOOST_TEST(contains(second.output, "V" + latest + "\n"), second.output);
    BOOST_TEST(!contains(second.output, "NOTICE"), second.output);
    BOOST_TEST(contains(second.output, "schema version: " + latest), second.output);

    auto third = run("--postgres " + quote(conninfo));
    BOOST_TEST(third.exit_code == 0, third.output);
    BOOST_TEST(contains(third.output, "applied: none"), third.output);
}

BOOST_AUTO_TEST_CASE(refusals_exit_1) {
    const auto conninfo = pg_server::shared().create_database();
    BOOST_TEST(run("--postgres " + quote(conninfo)).exit_code == 0);
    {
        soci::session s(soci::postgresql, conninfo);
        s << "UPDATE seqinbox_schema_history SET checksum = 'changed' WHERE version = 1";
    }
    auto changed = run("--postgres " + quote(conninfo));
    BOOST_TEST(changed.exit_code == 1, changed.output);
    BOOST_TEST(contains(changed.output, "schema_mismatch"), changed.output);

    auto unreachable = run("--postgres 'host=127.0.0.1 port=1 dbname=x user=postgres connect_timeout=5'");
    BOOST_TEST(unreachable.exit_code == 1, unreachable.output);
    BOOST_TEST(contains(unreachable.output, "connection"), unreachable.output);
}

/// Against a port nobody listens on, with secrets (parts Pw1, Pw2, Pw3) in every place libpq
/// takes one: the refusal names the connection but shows no part of any secret.
BOOST_AUTO_TEST_CASE(an_unreachable_database_is_named_without_its_secrets) {
    for (const std::string conninfo : {
             "host=127.0.0.1 port=1 dbname=x user=postgres password='Pw1 Pw2' sslpassword=Pw3 connect_timeout=5",
             "postgresql://postgres:Pw1?Pw2@127.0.0.1:1/x?sslpassword=Pw3&connect_timeout=5",
             "postgresql://postgres:Pw1/Pw2@127.0.0.1:1/x?connect_timeout=5",
             "postgresql://postgres:Pw1%zzPw2@127.0.0.1:1/x?connect_timeout=5",
         }) {
        auto refused = run("--postgres " + quote(conninfo));
        BOOST_TEST(refused.exit_code == 1, refused.output);
        BOOST_TEST(contains(refused.output, "connection"), refused.output);
        for (const char* part : {"Pw1", "Pw2", "Pw3"}) BOOST_TEST(!contains(refused.output, part), refused.output);
    }
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
    auto missing = run("");
    BOOST_TEST(missing.exit_code == 2, missing.output);
    BOOST_TEST(contains(missing.output, "'--postgres' is required"), missing.output);
    BOOST_TEST(run("--postgres").exit_code == 2);
    BOOST_TEST(run("--postgres x --target two").exit_code == 2);
    BOOST_TEST(run("--postgres x --target 999").exit_code == 2);
    BOOST_TEST(run("--postgres x --bogus").exit_code == 2);
    auto help = run("--help");
    BOOST_TEST(help.exit_code == 0);
    BOOST_TEST(contains(help.output, "usage: seqinbox migrate"), help.output);
}
