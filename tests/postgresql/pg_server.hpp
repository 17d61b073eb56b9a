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
// process started with the server (support/watchdog_process.hpp) waits for its owner to go away
// and then stops the server and removes the directory. Should the watchdog die too, every server
// directory records its owner's pid, and the next pg_server removes the servers of owners that no
// longer exist (support/server_directory.hpp).
//
// Binaries come from SEQINBOX_PG_BIN (environment) or /usr/lib/postgresql/15/bin.
// Usage: pg_server& server = pg_server::shared(); auto conninfo = server.create_database();
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include "support/process.hpp"
#include "support/server_directory.hpp"
#include "support/shell_command.hpp"
#include "support/unused_port.hpp"
#include "support/watchdog_process.hpp"

namespace seqinbox::test {

class pg_server {
public:
    enum class commits { not_durable, durable };
    /// `raised`: max_connections 200 for the concurrency tests; `server_defaults`: the settings a
    /// fresh server has (max_connections 100, max_locks_per_transaction 64).
    enum class limits { raised, server_defaults };

    explicit pg_server(commits durability = commits::not_durable, limits lock_limits = limits::raised)
        : durability_(durability), limits_(lock_limits) {
        remove_abandoned_directories(directory_prefix, kill_and_remove);
        dir_ = make_server_directory(directory_prefix, "postgres", "pg_server");
        try {
            run(bin("initdb") + " -D " + shell_quote(data_dir()) + " -U postgres -A trust -E UTF8 --locale=C --no-sync",
                "initdb");
            if (!start_on_unused_port(port_, [&] { return try_start(); }))
                throw std::runtime_error("pg_server: pg_ctl start failed:\n" + read_log());
            start_watchdog();
        } catch (...) {
            stop_and_remove();
            throw;
        }
    }

    pg_server(const pg_server&) = delete;
    pg_server& operator=(const pg_server&) = delete;

    ~pg_server() { stop_and_remove(); }  // then watchdog_ ends

    /// One server per test process, started on first use and stopped at exit.
    static pg_server& shared() {
        static pg_server server;
        return server;
    }

    int port() const noexcept { return port_; }

    /// The server's directory (data, logs, socket, owner.pid).
    const std::filesystem::path& directory() const noexcept { return dir_; }

    /// The process that removes the server when this process dies without cleaning up.
    pid_t watchdog() const noexcept { return watchdog_.pid(); }

    /// The running postmaster's pid, as its postmaster.pid has it (0: none).
    pid_t postmaster() const { return pid_in_file(dir_ / "data" / "postmaster.pid"); }

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
    void stop() { try_run(bin("pg_ctl") + " stop -m immediate -w -D " + shell_quote(data_dir())); }

    /// Starts the server again after stop(), on the same data directory and port, once it has
    /// recovered from its WAL and accepts connections.
    void start() {
        if (!try_start()) throw std::runtime_error("pg_server: pg_ctl start after a stop failed:\n" + read_log());
    }

private:
    static constexpr const char* directory_prefix = "seqinbox-pg-";

    static std::string bin(const std::string& program) {
        const char* dir = std::getenv("SEQINBOX_PG_BIN");
        return shell_quote(std::string(dir != nullptr ? dir : "/usr/lib/postgresql/15/bin") + "/" + program);
    }

    /// `command` as the server's owner: postgres when we are root, ourselves otherwise.
    static std::string as_owner(const std::string& command) { return as_user("postgres", command); }

    bool try_run(const std::string& command) const { return run_logged(as_owner(command), (dir_ / "commands.log").string()); }

    void run(const std::string& command, const std::string& what) const {
        if (!try_run(command)) throw std::runtime_error("pg_server: " + what + " failed:\n" + read_log());
    }

    std::string read_log() const { return read_files(dir_, {"commands.log", "server.log"}); }

    std::string data_dir() const { return (dir_ / "data").string(); }

    bool try_start() const {
        const std::string options = "-c listen_addresses=127.0.0.1 -p " + std::to_string(port_) + " -k " + shell_quote(dir_.string()) +
                                    (limits_ == limits::raised ? " -c max_connections=200" : "") +
                                    (durability_ == commits::durable
                                         ? ""
                                         : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        return try_run(bin("pg_ctl") + " start -w -t 60 -D " + shell_quote(data_dir()) + " -l " +
                       shell_quote((dir_ / "server.log").string()) + " -o " + shell_quote(options));
    }

    /// Kills the postmaster recorded in `dir` (if any; SIGQUIT: immediate shutdown, its children
    /// follow) and removes the directory.
    static void kill_and_remove(const std::filesystem::path& dir) {
        stop_process(pid_in_file(dir / "data" / "postmaster.pid"), SIGQUIT, std::chrono::seconds(5));
        remove_directory(dir);
    }

    /// The watchdog stops the server (immediate shutdown) and removes the directory.
    void start_watchdog() {
        watchdog_.start(as_owner(bin("pg_ctl") + " stop -m immediate -D " + shell_quote(data_dir())) + " >/dev/null 2>&1; rm -rf " +
                            shell_quote(dir_.string()),
                        "pg_server");
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
    watchdog_process watchdog_;
};

}  // namespace seqinbox::test
