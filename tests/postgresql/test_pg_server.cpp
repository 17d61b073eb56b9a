// The test fixture itself: a server accepts connections while its pg_server lives and is gone,
// directory included, afterwards; a server left by a killed test process is removed by the next
// pg_server.
#define BOOST_TEST_MODULE seqinbox postgresql test server
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "pg_test_support.hpp"

using seqinbox::test::pg_server;

namespace {

pid_t postmaster_pid(const std::filesystem::path& dir) {
    std::ifstream in(dir / "data" / "postmaster.pid");
    pid_t pid = 0;
    in >> pid;
    return pid;
}

}  // namespace

BOOST_AUTO_TEST_CASE(server_is_removed_with_its_fixture) {
    std::filesystem::path dir;
    pid_t postmaster = 0;
    {
        pg_server server;
        dir = server.directory();
        postmaster = postmaster_pid(dir);
        BOOST_TEST(pg_server::alive(postmaster));
        soci::session s(soci::postgresql, server.create_database());
        BOOST_TEST(seqinbox::test::count(s, "SELECT 1") == 1);
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    BOOST_TEST(!pg_server::alive(postmaster));
}

namespace {

/// A test process that dies without running destructors: forks a child that starts a server,
/// reports its directory and watchdog pid, then runs `then` (exit or wait to be killed).
struct dying_owner {
    pid_t pid = 0;
    std::filesystem::path dir;
    pid_t watchdog = 0;
    pid_t postmaster = 0;

    explicit dying_owner(bool wait_to_be_killed) {
        int channel[2];
        BOOST_REQUIRE(::pipe2(channel, O_CLOEXEC) == 0);  // the servers started by the child must not hold it
        pid = ::fork();
        BOOST_REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(channel[0]);
            auto* server = new pg_server;
            const std::string report = std::to_string(server->watchdog()) + " " + server->directory().string();
            if (::write(channel[1], report.data(), report.size()) != static_cast<ssize_t>(report.size())) ::_exit(2);
            ::close(channel[1]);
            if (wait_to_be_killed) ::pause();
            ::_exit(0);
        }
        ::close(channel[1]);
        std::string report;
        char buffer[512];
        for (ssize_t n; (n = ::read(channel[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<std::size_t>(n));
        ::close(channel[0]);
        const auto space = report.find(' ');
        BOOST_REQUIRE(space != std::string::npos);
        watchdog = std::stoi(report.substr(0, space));
        BOOST_REQUIRE(watchdog > 0);  // kill(-1, ...) would signal every process of ours
        dir = report.substr(space + 1);
        postmaster = postmaster_pid(dir);
        BOOST_REQUIRE(pg_server::alive(postmaster));
    }

    void wait() const {
        int status = 0;
        ::waitpid(pid, &status, 0);
    }
};

bool gone_within(const std::filesystem::path& dir, pid_t postmaster, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::filesystem::exists(dir) || pg_server::alive(postmaster)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(server_of_an_interrupted_test_process_is_removed_by_its_watchdog) {
    dying_owner owner(true);
    ::kill(owner.pid, SIGINT);  // Ctrl-C; the watchdog ignores it and acts on its owner's death
    owner.wait();
    BOOST_TEST(gone_within(owner.dir, owner.postmaster, std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(server_of_a_killed_test_process_is_cleaned_up) {
    dying_owner owner(true);
    ::kill(owner.watchdog, SIGKILL);  // watchdog gone too: the next pg_server must clean up
    ::waitpid(owner.watchdog, nullptr, 0);
    ::kill(owner.pid, SIGKILL);
    owner.wait();
    BOOST_REQUIRE(pg_server::alive(owner.postmaster));  // left running by the dead test process

    pg_server next;  // cleans up before starting its own server
    BOOST_TEST(!std::filesystem::exists(owner.dir));
    BOOST_TEST(!pg_server::alive(owner.postmaster));
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
    const pid_t crashed = postmaster_pid(server.directory());
    server.stop();
    BOOST_TEST(!pg_server::alive(crashed));
    BOOST_CHECK_THROW(soci::session(soci::postgresql, conninfo), soci::soci_error);

    server.start();
    BOOST_TEST(server.port() == port);
    BOOST_TEST(postmaster_pid(server.directory()) != crashed);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(seqinbox::test::count(s, "SELECT count(*) FROM kept") == 1);
    std::ifstream log(server.directory() / "server.log");
    const std::string text(std::istreambuf_iterator<char>(log), {});
    BOOST_TEST(text.find("automatic recovery in progress") != std::string::npos, "the start recovered from a crash:\n" << text);
}
