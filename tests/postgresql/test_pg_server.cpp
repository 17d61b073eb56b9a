// The test fixture itself: a server accepts connections while its pg_server lives and is gone,
// directory included, afterwards; a server left by a killed test process is removed by the next
// pg_server.
#define BOOST_TEST_MODULE seqinbox postgresql test server
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "pg_test_support.hpp"
#include "support/dying_owner.hpp"
#include "support/process.hpp"

using seqinbox::test::dying_owner;
using seqinbox::test::pg_server;
using seqinbox::test::process_alive;

namespace {

/// Starts a server in the child of a dying_owner.
seqinbox::test::started_server start_abandoned_server() {
    const auto* server = new pg_server;
    return {server->watchdog(), server->postmaster(), server->directory()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(server_is_removed_with_its_fixture) {
    std::filesystem::path dir;
    pid_t postmaster = 0;
    {
        pg_server server;
        dir = server.directory();
        postmaster = server.postmaster();
        BOOST_TEST(process_alive(postmaster));
        soci::session s(soci::postgresql, server.create_database());
        BOOST_TEST(seqinbox::test::count(s, "SELECT 1") == 1);
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    BOOST_TEST(!process_alive(postmaster));
}

BOOST_AUTO_TEST_CASE(server_of_an_interrupted_test_process_is_removed_by_its_watchdog) {
    const dying_owner owner(start_abandoned_server);
    owner.kill_and_wait(SIGINT);  // Ctrl-C; the watchdog ignores it and acts on its owner's death
    BOOST_TEST(owner.gone_within(std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(server_of_a_killed_test_process_is_cleaned_up) {
    const dying_owner owner(start_abandoned_server);
    owner.kill_watchdog();  // watchdog gone too: the next pg_server must clean up
    owner.kill_and_wait();
    BOOST_REQUIRE(process_alive(owner.server));  // left running by the dead test process

    pg_server next;  // cleans up before starting its own server
    BOOST_TEST(!std::filesystem::exists(owner.dir));
    BOOST_TEST(!process_alive(owner.server));
}

BOOST_AUTO_TEST_CASE(a_durable_server_keeps_its_commits_across_a_crash_and_comes_back_on_its_port) {
    pg_server server(pg_server::commits::durable);
    const auto conninfo = server.create_database();
    const auto setting = [&](const std::string& name) {
        soci::session s(soci::postgresql, conninfo);
        std::string value;
        s << "SHOW " + name, soci::into(value);
        return value;
    };
    BOOST_TEST(setting("fsync") == "on");
    BOOST_TEST(setting("synchronous_commit") == "on");
    {
        soci::session s(soci::postgresql, conninfo);
        s << "CREATE TABLE kept (n integer)";
        s << "INSERT INTO kept VALUES (1)";
    }
    const auto port = server.port();
    const pid_t crashed = server.postmaster();
    server.stop();
    BOOST_TEST(!process_alive(crashed));
    BOOST_CHECK_THROW(soci::session(soci::postgresql, conninfo), soci::soci_error);

    server.start();
    BOOST_TEST(server.port() == port);
    BOOST_TEST(server.postmaster() != crashed);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM kept") == 1);
    std::ifstream log(server.directory() / "server.log");
    const std::string text(std::istreambuf_iterator<char>(log), {});
    BOOST_TEST(text.find("automatic recovery in progress") != std::string::npos, "the start recovered from a crash:\n" << text);
}
