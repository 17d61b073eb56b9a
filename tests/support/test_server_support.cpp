// The machinery the throwaway servers share (tests/support), without a server: a stand-in
// "server" (a shell that sleeps) is stopped and its directory removed by the watchdog when its
// test process dies, by the next owner when the watchdog died too; a process that ignores the
// polite signal is killed; ports are retried; commands run quoted and logged. The servers' own
// tests (test_pg_server.cpp, test_mariadb_server.cpp) check the same against the real servers.
#define BOOST_TEST_MODULE seqinbox throwaway server support
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/dying_owner.hpp"
#include "support/process.hpp"
#include "support/server_directory.hpp"
#include "support/shell_command.hpp"
#include "support/spawn.hpp"
#include "support/unused_port.hpp"
#include "support/watchdog_process.hpp"

namespace st = seqinbox::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* prefix = "seqinbox-support-test-";

/// Whether the shell `pid` has started a command: it has run the `trap` before it.
bool has_children(pid_t pid) {
    std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    pid_t child = 0;
    return static_cast<bool>(children >> child);
}

/// A process that runs until it is killed, and ignores SIGTERM (as a server slow to stop).
pid_t stubborn_process() {
    const pid_t pid = st::spawn("/bin/sh", {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"}, {});
    BOOST_REQUIRE(pid > 0);
    BOOST_REQUIRE(st::wait_until([&] { return has_children(pid); }, 10s, 10ms));
    return pid;
}

/// A stand-in for a server: its directory, its process (pid in server.pid), and a watchdog that
/// kills it and removes the directory. Never destroyed: it belongs to a test process that dies.
struct stand_in_server {
    std::filesystem::path dir = st::make_server_directory(prefix, "nobody", "stand_in_server");
    pid_t process = stubborn_process();
    st::watchdog_process watchdog;

    stand_in_server() {
        std::ofstream(dir / "server.pid") << process << '\n';
        watchdog.start(cleanup_script(dir), "stand_in_server");
    }

    static std::string cleanup_script(const std::filesystem::path& dir) {
        const std::string pid_file = st::shell_quote((dir / "server.pid").string());
        return "kill -9 $(cat " + pid_file + "); rm -rf " + st::shell_quote(dir.string());
    }

    static void kill_and_remove(const std::filesystem::path& dir) {
        st::stop_process(st::pid_in_file(dir / "server.pid"), SIGTERM, 200ms);
        st::remove_directory(dir);
    }
};

st::started_server start_abandoned_server() {
    const auto* server = new stand_in_server;
    return {server->watchdog.pid(), server->process, server->dir};
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_watchdog_cleans_up_when_its_owner_is_killed) {
    const st::dying_owner owner(start_abandoned_server);
    owner.kill_and_wait();
    BOOST_TEST(owner.gone_within(30s));
}

BOOST_AUTO_TEST_CASE(the_watchdog_ignores_ctrl_c_and_cleans_up_when_its_owner_ends) {
    const st::dying_owner owner(start_abandoned_server);
    // Once its shell ignores the signals (it has started `cat`), Ctrl-C on its process group.
    BOOST_REQUIRE(st::wait_until([&] { return has_children(owner.watchdog); }, 10s, 10ms));
    ::kill(-owner.watchdog, SIGINT);
    owner.kill_and_wait(SIGINT);
    BOOST_TEST(owner.gone_within(30s));
}

BOOST_AUTO_TEST_CASE(the_next_owner_removes_what_a_killed_owner_and_watchdog_left) {
    const st::dying_owner owner(start_abandoned_server);
    owner.kill_watchdog();
    owner.kill_and_wait();
    BOOST_REQUIRE(st::process_alive(owner.server));  // left running by the dead test process

    const auto mine = st::make_server_directory(prefix, "nobody", "stand_in_server");
    st::remove_abandoned_directories(prefix, stand_in_server::kill_and_remove);
    BOOST_TEST(!std::filesystem::exists(owner.dir));
    // SIGKILL after the patience: the kill lands a moment later.
    BOOST_TEST(st::wait_until([&] { return !st::process_alive(owner.server); }, 5s, 10ms));
    BOOST_TEST(std::filesystem::exists(mine));  // its owner, this process, lives
    st::remove_directory(mine);
}

BOOST_AUTO_TEST_CASE(a_process_that_ignores_the_signal_is_killed_after_the_patience) {
    const pid_t pid = stubborn_process();
    const auto start = std::chrono::steady_clock::now();
    st::stop_process(pid, SIGTERM, 300ms);
    const bool waited_the_patience = std::chrono::steady_clock::now() - start >= 300ms;
    BOOST_TEST(waited_the_patience);
    BOOST_TEST(st::wait_until([&] { return !st::process_alive(pid); }, 5s, 10ms));  // a zombie counts as gone
    int status = 0;
    BOOST_TEST(::waitpid(pid, &status, 0) == pid);
    BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
}

BOOST_AUTO_TEST_CASE(a_server_that_loses_its_port_is_started_on_another_up_to_three_times) {
    int port = 0, tries = 0;
    BOOST_TEST(st::start_on_unused_port(port, [&] { return ++tries == 3; }));
    BOOST_TEST(tries == 3);
    BOOST_TEST(port > 0);
    tries = 0;
    BOOST_TEST(!st::start_on_unused_port(port, [&] { return ++tries > 3; }));
    BOOST_TEST(tries == 3);
}

BOOST_AUTO_TEST_CASE(commands_run_quoted_with_their_output_and_exit_status_logged) {
    const auto dir = st::make_server_directory(prefix, "nobody", "stand_in_server");
    const auto log = (dir / "commands.log").string();
    BOOST_TEST(st::run_logged("printf '%s\\n' " + st::shell_quote("it's a; $(test)"), log));
    BOOST_TEST(!st::run_logged("echo failing >&2; false", log));
    BOOST_TEST(st::read_files(dir, {"commands.log", "missing.log"}) == "it's a; $(test)\nfailing\n");
    st::remove_directory(dir);
    BOOST_TEST(!std::filesystem::exists(dir));
}
