#pragma once
// For the tests of the throwaway servers' cleanup (Boost.Test): a test process that dies without
// running destructors. A forked child starts a server, reports the server's directory, pid and
// watchdog through a pipe, then waits to be killed; the test kills it (and perhaps its watchdog)
// and checks that the server and its directory go.
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <string>

#include <boost/test/unit_test.hpp>

#include "support/process.hpp"
#include "support/wait_until.hpp"

namespace seqinbox::test {

/// What the child reports of the server it started.
struct started_server {
    pid_t watchdog = 0;
    pid_t server = 0;
    std::filesystem::path directory;
};

struct dying_owner {
    pid_t pid = 0;
    std::filesystem::path dir;
    pid_t watchdog = 0;
    pid_t server = 0;

    /// `start_server` runs in the child: it starts a server that it never destroys.
    explicit dying_owner(const std::function<started_server()>& start_server) {
        int channel[2];
        BOOST_REQUIRE(::pipe2(channel, O_CLOEXEC) == 0);  // the servers started by the child must not hold it
        pid = ::fork();
        BOOST_REQUIRE(pid >= 0);
        if (pid == 0) {
            try {
                report_and_wait(start_server(), channel);
            } catch (...) {
                ::_exit(3);  // not back into the test runner: the parent finds no report
            }
        }
        ::close(channel[1]);
        read_report(channel[0]);
        BOOST_REQUIRE(watchdog > 0);  // kill(-1, ...) would signal every process of ours
        BOOST_REQUIRE(server > 0);
        BOOST_REQUIRE(process_alive(server));
    }

    /// Ends the test process with `signal` and reaps it.
    void kill_and_wait(int signal = SIGKILL) const {
        ::kill(pid, signal);
        ::waitpid(pid, nullptr, 0);
    }

    /// Kills the watchdog first: the next server of the kind must then clean up.
    void kill_watchdog() const {
        ::kill(watchdog, SIGKILL);
        ::waitpid(watchdog, nullptr, 0);
    }

    /// Whether the server and its directory are gone within `limit`.
    bool gone_within(std::chrono::seconds limit) const {
        return wait_until([&] { return !std::filesystem::exists(dir) && !process_alive(server); }, limit, std::chrono::milliseconds(20));
    }

private:
    [[noreturn]] static void report_and_wait(const started_server& started, const int channel[2]) {
        ::close(channel[0]);
        const std::string report = std::to_string(started.watchdog) + " " + std::to_string(started.server) + " " + started.directory.string();
        if (::write(channel[1], report.data(), report.size()) != static_cast<ssize_t>(report.size())) ::_exit(2);
        ::close(channel[1]);
        ::pause();
        ::_exit(0);
    }

    void read_report(int from) {
        std::string report;
        char buffer[512];
        for (ssize_t n; (n = ::read(from, buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<std::size_t>(n));
        ::close(from);
        const auto first = report.find(' ');
        const auto second = report.find(' ', first + 1);
        BOOST_REQUIRE(second != std::string::npos);
        watchdog = std::stoi(report.substr(0, first));
        server = std::stoi(report.substr(first + 1, second - first - 1));
        dir = report.substr(second + 1);
    }
};

}  // namespace seqinbox::test
