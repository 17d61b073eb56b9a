// The test fixture itself: a throwaway mariadbd accepts connections while its mariadb_server
// lives, gives each create_database() a fresh database, and is gone, directory included,
// afterwards, also when the test process dies without cleaning up (its watchdog, or the next
// mariadb_server, removes it).
#define BOOST_TEST_MODULE seqinbox mariadb test server
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <pwd.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include "mariadb_server.hpp"

using seqinbox::test::mariadb_server;

namespace {

int count(soci::session& s, const std::string& sql) {
    long long n = 0;
    s << sql, soci::into(n);
    return static_cast<int>(n);
}

bool gone_within(const std::filesystem::path& dir, pid_t server, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::filesystem::exists(dir) || mariadb_server::alive(server)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
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
    BOOST_TEST(!mariadb_server::alive(server_pid));
}

namespace {

/// A test process that dies without running destructors: forks a child that starts a server,
/// reports its directory, watchdog and server pids, then waits to be killed.
struct dying_owner {
    pid_t pid = 0;
    std::filesystem::path dir;
    pid_t watchdog = 0;
    pid_t server = 0;

    dying_owner() {
        int channel[2];
        BOOST_REQUIRE(::pipe2(channel, O_CLOEXEC) == 0);  // the servers started by the child must not hold it
        pid = ::fork();
        BOOST_REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(channel[0]);
            auto* started = new mariadb_server;
            const std::string report =
                std::to_string(started->watchdog()) + " " + std::to_string(started->pid()) + " " + started->directory().string();
            if (::write(channel[1], report.data(), report.size()) != static_cast<ssize_t>(report.size())) ::_exit(2);
            ::close(channel[1]);
            ::pause();
            ::_exit(0);
        }
        ::close(channel[1]);
        std::string report;
        char buffer[512];
        for (ssize_t n; (n = ::read(channel[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<std::size_t>(n));
        ::close(channel[0]);
        const auto first = report.find(' ');
        const auto second = report.find(' ', first + 1);
        BOOST_REQUIRE(second != std::string::npos);
        watchdog = std::stoi(report.substr(0, first));
        server = std::stoi(report.substr(first + 1, second - first - 1));
        BOOST_REQUIRE(watchdog > 0);  // kill(-1, ...) would signal every process of ours
        BOOST_REQUIRE(server > 0);
        dir = report.substr(second + 1);
        BOOST_REQUIRE(mariadb_server::alive(server));
    }

    void kill_and_wait() const {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
};

}  // namespace

BOOST_AUTO_TEST_CASE(server_of_a_killed_test_process_is_removed_by_its_watchdog) {
    dying_owner owner;
    owner.kill_and_wait();
    BOOST_TEST(gone_within(owner.dir, owner.server, std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(server_left_by_a_killed_test_process_and_watchdog_is_removed_by_the_next_fixture) {
    dying_owner owner;
    ::kill(owner.watchdog, SIGKILL);
    ::waitpid(owner.watchdog, nullptr, 0);
    owner.kill_and_wait();
    BOOST_REQUIRE(mariadb_server::alive(owner.server));  // left running by the dead test process

    mariadb_server next;  // cleans up before starting its own server
    BOOST_TEST(!std::filesystem::exists(owner.dir));
    BOOST_TEST(!mariadb_server::alive(owner.server));
}
