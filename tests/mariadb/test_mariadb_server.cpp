// The test fixture itself: a throwaway mariadbd accepts connections while its mariadb_server
// lives, gives each create_database() a fresh database, and is gone, directory included,
// afterwards, also when the test process dies without cleaning up (its watchdog, or the next
// mariadb_server, removes it).
#define BOOST_TEST_MODULE seqinbox mariadb test server
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "mariadb_server.hpp"
#include "support/dying_owner.hpp"
#include "support/process.hpp"

using seqinbox::test::dying_owner;
using seqinbox::test::mariadb_server;
using seqinbox::test::process_alive;

namespace {

int count(soci::session& s, const std::string& sql) {
    long long n = 0;
    s << sql, soci::into(n);
    return static_cast<int>(n);
}

/// Starts a server in the child of a dying_owner.
seqinbox::test::started_server start_abandoned_server() {
    const auto* server = new mariadb_server;
    return {server->watchdog(), server->pid(), server->directory()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(server_gives_fresh_databases_and_is_removed_with_its_fixture) {
    std::filesystem::path dir;
    pid_t server_pid = 0;
    {
        mariadb_server server;
        dir = server.directory();
        server_pid = server.pid();
        BOOST_TEST(server_pid != 0);
        const auto first = server.create_database();
        const auto second = server.create_database();
        BOOST_TEST(first != second);
        BOOST_TEST(first.starts_with("mariadb://root@127.0.0.1:" + std::to_string(server.port()) + "/"));
        soci::session s(soci::mysql, server.soci_connect(mariadb_server::database_of(first)));
        s << "CREATE TABLE t (n INT) ENGINE=InnoDB";
        s << "INSERT INTO t VALUES (1)";
        BOOST_TEST(count(s, "SELECT count(*) FROM t") == 1);
        soci::session other(soci::mysql, server.soci_connect(mariadb_server::database_of(second)));
        BOOST_TEST(count(other, "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()") == 0);
        // mariadbd refuses root: run as root, the fixture runs it as the mysql user.
        if (::geteuid() == 0) {
            struct stat process {};
            BOOST_REQUIRE(::stat(("/proc/" + std::to_string(server_pid)).c_str(), &process) == 0);
            const passwd* mysql = ::getpwnam("mysql");
            BOOST_REQUIRE(mysql != nullptr);
            BOOST_TEST(process.st_uid == mysql->pw_uid);
        }
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    BOOST_TEST(!process_alive(server_pid));
}

BOOST_AUTO_TEST_CASE(server_of_a_killed_test_process_is_removed_by_its_watchdog) {
    const dying_owner owner(start_abandoned_server);
    owner.kill_and_wait();
    BOOST_TEST(owner.gone_within(std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(server_left_by_a_killed_test_process_and_watchdog_is_removed_by_the_next_fixture) {
    const dying_owner owner(start_abandoned_server);
    owner.kill_watchdog();
    owner.kill_and_wait();
    BOOST_REQUIRE(process_alive(owner.server));  // left running by the dead test process

    mariadb_server next;  // cleans up before starting its own server
    BOOST_TEST(!std::filesystem::exists(owner.dir));
    BOOST_TEST(!process_alive(owner.server));
}
