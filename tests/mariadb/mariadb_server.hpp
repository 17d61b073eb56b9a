#pragma once
// A throwaway MariaDB server for tests: mariadb-install-db into a fresh directory under the system
// temp dir (owned by the `mysql` user when the tests run as root, since mariadbd refuses to run as
// root), listening on 127.0.0.1 at a free port with its unix socket inside that directory. The
// account is root without a password. Tests run it without durable commits
// (innodb_flush_log_at_trx_commit 0, no doublewrite); benchmarks and crash tests may ask for the
// server's defaults, where a commit waits for its redo log to reach the disk. stop() crashes the
// server (SIGKILL); start() brings it back on the same port. The destructor kills the server and
// removes the directory.
//
// As pg_server does: a watchdog process (support/watchdog_process.hpp) waits for its owner to go
// away, whatever the cause, SIGKILL included, then kills the server and removes the directory;
// every directory records its owner's pid, and the next mariadb_server removes the servers of
// owners that no longer exist (support/server_directory.hpp).
//
// Usage: mariadb_server& server = mariadb_server::shared(); auto url = server.create_database();
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>
#include "support/process.hpp"
#include "support/server_directory.hpp"
#include "support/shell_command.hpp"
#include "support/unused_port.hpp"
#include "support/wait_until.hpp"
#include "support/watchdog_process.hpp"

namespace seqinbox::test {

class mariadb_server {
public:
    enum class commits { not_durable, durable };

    /// `server_options`: more mariadbd options (e.g. " --log-bin"), each with a leading space.
    explicit mariadb_server(commits durability = commits::not_durable, std::string server_options = {})
        : durability_(durability), server_options_(std::move(server_options)) {
        remove_abandoned_directories(directory_prefix, kill_and_remove);
        dir_ = make_server_directory(directory_prefix, "mysql", "mariadb_server");
        try {
            // A temporary directory of its own: bootstraps of two servers at once clashed in /tmp
            // ("Could not remove temporary table: '/tmp/#sql-temptable-...'").
            run("mariadb-install-db --no-defaults --datadir=" + shell_quote(data_dir()) + " --tmpdir=" + shell_quote(dir_.string()) +
                    " --auth-root-authentication-method=normal --skip-test-db" +
                    " --innodb-log-file-size=16M",
                "mariadb-install-db");
            if (!start_on_unused_port(port_, [&] { return try_start(); }))
                throw std::runtime_error("mariadb_server: mariadbd did not start:\n" + read_log());
            start_watchdog();
        } catch (...) {
            kill_and_remove(dir_);
            dir_.clear();
            throw;
        }
    }

    mariadb_server(const mariadb_server&) = delete;
    mariadb_server& operator=(const mariadb_server&) = delete;

    ~mariadb_server() {
        if (!dir_.empty()) kill_and_remove(dir_);
    }  // then watchdog_ ends

    /// One server per test process, started on first use and removed at exit.
    static mariadb_server& shared() {
        static mariadb_server server;
        return server;
    }

    int port() const noexcept { return port_; }
    const std::filesystem::path& directory() const noexcept { return dir_; }
    pid_t watchdog() const noexcept { return watchdog_.pid(); }

    /// The running mariadbd's pid (0 when it is not running).
    pid_t pid() const {
        const pid_t pid = pid_in_file(dir_ / "mariadbd.pid");
        return pid > 0 && process_alive(pid) ? pid : 0;
    }

    /// The store's connection string for database `name` (which need not exist).
    std::string url(const std::string& name) const {
        return "mariadb://root@127.0.0.1:" + std::to_string(port_) + "/" + name;
    }

    /// SOCI's MySQL connection string for database `name` ("" for none), for tests' own sessions.
    std::string soci_connect(const std::string& name = "") const {
        return "host=127.0.0.1 port=" + std::to_string(port_) + " user=root charset=utf8mb4" + (name.empty() ? "" : " db=" + name);
    }

    /// Creates a fresh, empty database and returns the store's connection string for it.
    std::string create_database() {
        static std::atomic<int> counter{0};
        const std::string name = "seqinbox_test_" + std::to_string(++counter);
        soci::session admin(soci::mysql, soci_connect());
        admin << "CREATE DATABASE " + name;
        return url(name);
    }

    /// The database name of a connection string made by url().
    static std::string database_of(const std::string& url) { return url.substr(url.rfind('/') + 1); }

    /// Crashes the server (SIGKILL); the destructor still cleans up.
    void stop() { stop_process(pid(), SIGKILL, std::chrono::seconds(2)); }

    /// Starts the server again after stop(), on the same data directory and port, once it has
    /// recovered and accepts connections.
    void start() {
        if (!try_start()) throw std::runtime_error("mariadb_server: mariadbd did not start again:\n" + read_log());
    }

private:
    static constexpr const char* directory_prefix = "seqinbox-mariadb-";

    bool try_run(const std::string& command) const {
        return run_logged(as_user("mysql", command), (dir_ / "commands.log").string());
    }

    void run(const std::string& command, const std::string& what) const {
        if (!try_run(command)) throw std::runtime_error("mariadb_server: " + what + " failed:\n" + read_log());
    }

    std::string read_log() const { return read_files(dir_, {"commands.log", "server.log"}); }

    std::string data_dir() const { return (dir_ / "data").string(); }

    /// Starts mariadbd in the background and waits until it accepts connections or exits.
    bool try_start() const {
        std::filesystem::remove(dir_ / "mariadbd.pid");
        const std::string options =
            " --no-defaults --datadir=" + shell_quote(data_dir()) + " --tmpdir=" + shell_quote(dir_.string()) +
            " --socket=" + shell_quote((dir_ / "sock").string()) +
            " --port=" + std::to_string(port_) + " --bind-address=127.0.0.1 --pid-file=" +
            shell_quote((dir_ / "mariadbd.pid").string()) + " --log-error=" + shell_quote((dir_ / "server.log").string()) +
            " --max-connections=300 --innodb-log-file-size=16M --innodb-buffer-pool-size=64M" +
            (durability_ == commits::durable ? "" : " --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0") + server_options_;
        if (!try_run("mariadbd" + options + " </dev/null >/dev/null 2>&1 &")) return false;
        bool accepting = false;
        wait_until([&] { return (accepting = accepts_connections()) || aborted(); }, std::chrono::seconds(60), std::chrono::milliseconds(50));
        return accepting;
    }

    /// A server that lost its port exits, saying so in its log.
    bool aborted() const { return read_files(dir_, {"server.log"}).find("Aborting") != std::string::npos; }

    /// The pid file appears once the server listens.
    bool accepts_connections() const {
        if (pid() == 0) return false;
        try {
            soci::session probe(soci::mysql, soci_connect());
            return true;
        } catch (const soci::soci_error&) {
            return false;
        }
    }

    /// Kills the mariadbd recorded in `dir` (if any) and removes the directory.
    static void kill_and_remove(const std::filesystem::path& dir) {
        // Nothing of a throwaway server is worth a clean shutdown.
        stop_process(pid_in_file(dir / "mariadbd.pid"), SIGKILL, std::chrono::seconds(2));
        remove_directory(dir);
    }

    /// The watchdog kills the server and removes the directory.
    void start_watchdog() {
        const std::string pid_file = shell_quote((dir_ / "mariadbd.pid").string());
        watchdog_.start("[ -f " + pid_file + " ] && kill -9 $(cat " + pid_file + ") 2>/dev/null; sleep 0.2; rm -rf " +
                            shell_quote(dir_.string()),
                        "mariadb_server");
    }

    commits durability_;
    std::string server_options_;
    std::filesystem::path dir_;
    int port_ = 0;
    watchdog_process watchdog_;
};

}  // namespace seqinbox::test
