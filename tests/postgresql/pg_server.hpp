#pragma once
// A throwaway PostgreSQL 15 server for tests: initdb into a fresh directory under the system
// temp dir (owned by the `postgres` user when the tests run as root, since initdb refuses root),
// listening on 127.0.0.1 at a free port with its unix socket inside that directory. Tests run it
// without durable commits (fsync, synchronous_commit and full_page_writes off); benchmarks and
// crash tests may ask for PostgreSQL's defaults, where a commit waits for its WAL to reach the
// disk. stop() crashes the server (immediate shutdown); start() brings it back on the same port.
// The destructor stops the server and removes the directory.
//
// A test process that is interrupted (Ctrl-C) or killed cannot run its destructor. A watchdog
// process started with the server waits for its owner to go away (EOF on a pipe only the owner
// holds, whatever the cause) and then stops the server and removes the directory; it ignores the
// terminal's signals. Should the watchdog die too, every server directory records its owner's
// pid, and the next pg_server removes the servers of owners that no longer exist.
//
// Binaries come from SEQINBOX_PG_BIN (environment) or /usr/lib/postgresql/15/bin.
// Usage: pg_server& server = pg_server::shared(); auto conninfo = server.create_database();
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include "support/unused_port.hpp"

namespace seqinbox::test {

class pg_server {
public:
    enum class commits { not_durable, durable };
    /// `raised`: max_connections 200 for the concurrency tests; `server_defaults`: the settings a
    /// fresh server has (max_connections 100, max_locks_per_transaction 64).
    enum class limits { raised, server_defaults };

    explicit pg_server(commits durability = commits::not_durable, limits lock_limits = limits::raised)
        : durability_(durability), limits_(lock_limits) {
        remove_stale_servers();
        dir_ = make_directory();
        try {
            run(bin("initdb") + " -D " + quote(data_dir()) + " -U postgres -A trust -E UTF8 --locale=C --no-sync",
                "initdb");
            // A free port can be taken between probing and listening: try a few.
            for (int attempt = 1;; ++attempt) {
                port_ = unused_port();
                if (try_start()) break;
                if (attempt == 3) throw std::runtime_error("pg_server: pg_ctl start failed:\n" + read_log());
            }
            start_watchdog();
        } catch (...) {
            stop_and_remove();
            throw;
        }
    }

    pg_server(const pg_server&) = delete;
    pg_server& operator=(const pg_server&) = delete;

    ~pg_server() {
        stop_and_remove();
        end_watchdog();
    }

    /// One server per test process, started on first use and stopped at exit.
    static pg_server& shared() {
        static pg_server server;
        return server;
    }

    int port() const noexcept { return port_; }

    /// The server's directory (data, logs, socket, owner.pid).
    const std::filesystem::path& directory() const noexcept { return dir_; }

    /// The process that removes the server when this process dies without cleaning up.
    pid_t watchdog() const noexcept { return watchdog_; }

    /// True while process `pid` exists and is not a zombie (a container's init may never reap
    /// an orphaned postmaster).
    static bool alive(pid_t pid) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(stat, line)) return ::kill(pid, 0) == 0;
        const auto paren = line.rfind(')');
        return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
    }

    /// Conninfo for database `name` (which need not exist).
    std::string conninfo(const std::string& name = "postgres") const {
        return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + name + " user=postgres";
    }

    /// Creates a fresh, empty database and returns its conninfo.
    std::string create_database() {
        static std::atomic<int> counter{0};
        const std::string name = "seqinbox_test_" + std::to_string(++counter);
        soci::session admin(soci::postgresql, conninfo());
        admin << "CREATE DATABASE " + name;
        return conninfo(name);
    }

    /// Stops the server (e.g. to test a database that is down); the destructor still cleans up.
    /// The stop is immediate, as a crash: the server does no checkpoint, and start() recovers.
    void stop() { try_run(bin("pg_ctl") + " stop -m immediate -w -D " + quote(data_dir())); }

    /// Starts the server again after stop(), on the same data directory and port, once it has
    /// recovered from its WAL and accepts connections.
    void start() {
        if (!try_start()) throw std::runtime_error("pg_server: pg_ctl start after a stop failed:\n" + read_log());
    }

private:
    static std::string bin(const std::string& program) {
        const char* dir = std::getenv("SEQINBOX_PG_BIN");
        return quote(std::string(dir != nullptr ? dir : "/usr/lib/postgresql/15/bin") + "/" + program);
    }

    static std::string quote(const std::string& s) {
        std::string out = "'";
        for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return out + "'";
    }

    static bool is_root() { return ::geteuid() == 0; }

    /// `command` as the server's owner: postgres when we are root, ourselves otherwise.
    static std::string as_owner(const std::string& command) {
        return is_root() ? "runuser -u postgres -- sh -c " + quote(command) : command;
    }

    bool try_run(const std::string& command) const {
        const std::string log = (dir_ / "commands.log").string();
        const int status = std::system((as_owner(command) + " >>" + quote(log) + " 2>&1").c_str());
        return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

    void run(const std::string& command, const std::string& what) const {
        if (!try_run(command)) throw std::runtime_error("pg_server: " + what + " failed:\n" + read_log());
    }

    std::string read_log() const {
        std::string text;
        for (const char* name : {"commands.log", "server.log"}) {
            std::ifstream in(dir_ / name);
            text += std::string(std::istreambuf_iterator<char>(in), {});
        }
        return text;
    }

    std::string data_dir() const { return (dir_ / "data").string(); }

    bool try_start() const {
        const std::string options = "-c listen_addresses=127.0.0.1 -p " + std::to_string(port_) + " -k " + quote(dir_.string()) +
                                    (limits_ == limits::raised ? " -c max_connections=200" : "") +
                                    (durability_ == commits::durable
                                         ? ""
                                         : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        return try_run(bin("pg_ctl") + " start -w -t 60 -D " + quote(data_dir()) + " -l " +
                       quote((dir_ / "server.log").string()) + " -o " + quote(options));
    }

    static std::filesystem::path temp_root() { return std::filesystem::temp_directory_path(); }

    static std::filesystem::path make_directory() {
        std::string pattern = (temp_root() / "seqinbox-pg-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("pg_server: mkdtemp failed");
        const std::filesystem::path dir = pattern;
        std::ofstream(dir / "owner.pid") << ::getpid() << '\n';
        if (is_root()) {
            const passwd* pw = ::getpwnam("postgres");
            if (pw == nullptr) throw std::runtime_error("pg_server: running as root needs a 'postgres' user");
            if (::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0)
                throw std::runtime_error("pg_server: cannot chown " + dir.string());
        }
        ::chmod(dir.c_str(), 0700);
        return dir;
    }


    /// Kills the postmaster recorded in `dir` (if any) and removes the directory.
    static void kill_and_remove(const std::filesystem::path& dir) {
        std::ifstream pid_file(dir / "data" / "postmaster.pid");
        pid_t pid = 0;
        if (pid_file >> pid && pid > 0) {
            ::kill(pid, SIGQUIT);  // immediate shutdown; its children follow
            for (int i = 0; i < 100 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (alive(pid)) ::kill(pid, SIGKILL);
        }
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }

    /// Servers left behind by test processes that were killed.
    static void remove_stale_servers() {
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(temp_root(), ec)) {
            if (!entry.path().filename().string().starts_with("seqinbox-pg-")) continue;
            std::ifstream owner_file(entry.path() / "owner.pid");
            pid_t owner = 0;
            if (!(owner_file >> owner) || owner <= 0) continue;  // being created right now
            if (alive(owner)) continue;
            kill_and_remove(entry.path());
        }
    }

    /// Forks the watchdog and execs a shell at once (nothing else is safe after fork in a
    /// threaded process): it reads its stdin, the pipe, until EOF, then cleans up.
    void start_watchdog() {
        const std::string cleanup = "trap '' INT TERM HUP; cat >/dev/null; " + as_owner(bin("pg_ctl") + " stop -m immediate -D " +
                                    quote(data_dir())) + " >/dev/null 2>&1; rm -rf " + quote(dir_.string());
        const char* argv[] = {"/bin/sh", "-c", cleanup.c_str(), nullptr};
        int channel[2];
        if (::pipe2(channel, O_CLOEXEC) != 0) throw std::runtime_error("pg_server: pipe2 failed");
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::dup2(channel[0], STDIN_FILENO);  // dup2 clears close-on-exec for stdin only
            ::setpgid(0, 0);                   // out of the terminal's process group: Ctrl-C does not reach it
            ::execv("/bin/sh", const_cast<char* const*>(argv));
            ::_exit(127);
        }
        ::close(channel[0]);
        if (pid < 0) {
            ::close(channel[1]);
            throw std::runtime_error("pg_server: fork failed");
        }
        watchdog_ = pid;
        watchdog_pipe_ = channel[1];
    }

    void end_watchdog() {
        if (watchdog_pipe_ < 0) return;
        ::close(watchdog_pipe_);
        watchdog_pipe_ = -1;
        ::waitpid(watchdog_, nullptr, 0);
    }

    void stop_and_remove() {
        if (dir_.empty()) return;
        stop();
        kill_and_remove(dir_);  // in case pg_ctl stop did not finish
        dir_.clear();
    }

    commits durability_;
    limits limits_;
    std::filesystem::path dir_;
    int port_ = 0;
    pid_t watchdog_ = -1;
    int watchdog_pipe_ = -1;
};

}  // namespace seqinbox::test
