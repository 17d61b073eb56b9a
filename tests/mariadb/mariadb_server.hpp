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
// As pg_server does: a watchdog process waits for its owner to go away (EOF on a pipe only the
// owner holds, whatever the cause, SIGKILL included), then kills the server and removes the
// directory; every directory records its owner's pid, and the next mariadb_server removes the
// servers of owners that no longer exist.
//
// Usage: mariadb_server& server = mariadb_server::shared(); auto url = server.create_database();
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>
#include "support/unused_port.hpp"

namespace seqinbox::test {

class mariadb_server {
public:
    enum class commits { not_durable, durable };

    explicit mariadb_server(commits durability = commits::not_durable) : durability_(durability) {
        remove_stale_servers();
        dir_ = make_directory();
        try {
            // A temporary directory of its own: bootstraps of two servers at once clashed in /tmp
            // ("Could not remove temporary table: '/tmp/#sql-temptable-...'").
            run("mariadb-install-db --no-defaults --datadir=" + quote(data_dir()) + " --tmpdir=" + quote(dir_.string()) +
                    " --auth-root-authentication-method=normal --skip-test-db" +
                    " --innodb-log-file-size=16M",
                "mariadb-install-db");
            // A free port can be taken between probing and listening: try a few.
            for (int attempt = 1;; ++attempt) {
                port_ = unused_port();
                if (try_start()) break;
                if (attempt == 3) throw std::runtime_error("mariadb_server: mariadbd did not start:\n" + read_log());
            }
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
        end_watchdog();
    }

    /// One server per test process, started on first use and removed at exit.
    static mariadb_server& shared() {
        static mariadb_server server;
        return server;
    }

    int port() const noexcept { return port_; }
    const std::filesystem::path& directory() const noexcept { return dir_; }
    pid_t watchdog() const noexcept { return watchdog_; }

    /// The running mariadbd's pid (0 when it is not running).
    pid_t pid() const {
        std::ifstream in(dir_ / "mariadbd.pid");
        pid_t pid = 0;
        in >> pid;
        return pid > 0 && alive(pid) ? pid : 0;
    }

    /// True while process `pid` exists and is not a zombie.
    static bool alive(pid_t pid) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(stat, line)) return ::kill(pid, 0) == 0;
        const auto paren = line.rfind(')');
        return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
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
    void stop() {
        if (const pid_t p = pid(); p != 0) {
            ::kill(p, SIGKILL);
            for (int i = 0; i < 200 && alive(p); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    /// Starts the server again after stop(), on the same data directory and port, once it has
    /// recovered and accepts connections.
    void start() {
        if (!try_start()) throw std::runtime_error("mariadb_server: mariadbd did not start again:\n" + read_log());
    }

private:
    static std::string quote(const std::string& s) {
        std::string out = "'";
        for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return out + "'";
    }

    static bool is_root() { return ::geteuid() == 0; }

    static std::string as_owner(const std::string& command) {
        return is_root() ? "runuser -u mysql -- sh -c " + quote(command) : command;
    }

    bool try_run(const std::string& command) const {
        const std::string log = (dir_ / "commands.log").string();
        const int status = std::system((as_owner(command) + " >>" + quote(log) + " 2>&1").c_str());
        return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

    void run(const std::string& command, const std::string& what) const {
        if (!try_run(command)) throw std::runtime_error("mariadb_server: " + what + " failed:\n" + read_log());
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

    /// Starts mariadbd in the background and waits until it accepts connections or exits.
    bool try_start() const {
        std::filesystem::remove(dir_ / "mariadbd.pid");
        const std::string options =
            " --no-defaults --datadir=" + quote(data_dir()) + " --tmpdir=" + quote(dir_.string()) +
            " --socket=" + quote((dir_ / "sock").string()) +
            " --port=" + std::to_string(port_) + " --bind-address=127.0.0.1 --pid-file=" +
            quote((dir_ / "mariadbd.pid").string()) + " --log-error=" + quote((dir_ / "server.log").string()) +
            " --max-connections=300 --innodb-log-file-size=16M --innodb-buffer-pool-size=64M" +
            (durability_ == commits::durable ? "" : " --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0");
        if (!try_run("mariadbd" + options + " </dev/null >/dev/null 2>&1 &")) return false;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            if (accepts_connections()) return true;
            // The pid file appears once the server listens; a server that lost its port exits.
            std::ifstream log(dir_ / "server.log");
            const std::string text(std::istreambuf_iterator<char>(log), {});
            if (text.find("Aborting") != std::string::npos) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    bool accepts_connections() const {
        if (pid() == 0) return false;
        try {
            soci::session probe(soci::mysql, soci_connect());
            return true;
        } catch (const soci::soci_error&) {
            return false;
        }
    }

    static std::filesystem::path temp_root() { return std::filesystem::temp_directory_path(); }

    static std::filesystem::path make_directory() {
        std::string pattern = (temp_root() / "seqinbox-mariadb-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mariadb_server: mkdtemp failed");
        const std::filesystem::path dir = pattern;
        std::ofstream(dir / "owner.pid") << ::getpid() << '\n';
        if (is_root()) {
            const passwd* pw = ::getpwnam("mysql");
            if (pw == nullptr) throw std::runtime_error("mariadb_server: running as root needs a 'mysql' user");
            if (::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0)
                throw std::runtime_error("mariadb_server: cannot chown " + dir.string());
        }
        ::chmod(dir.c_str(), 0700);
        return dir;
    }

    /// Kills the mariadbd recorded in `dir` (if any) and removes the directory.
    static void kill_and_remove(const std::filesystem::path& dir) {
        std::ifstream pid_file(dir / "mariadbd.pid");
        pid_t pid = 0;
        if (pid_file >> pid && pid > 0 && alive(pid)) {
            ::kill(pid, SIGKILL);  // nothing of a throwaway server is worth a clean shutdown
            for (int i = 0; i < 200 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }

    /// Servers left behind by test processes that were killed.
    static void remove_stale_servers() {
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(temp_root(), ec)) {
            if (!entry.path().filename().string().starts_with("seqinbox-mariadb-")) continue;
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
        const std::string pid_file = quote((dir_ / "mariadbd.pid").string());
        const std::string cleanup = "trap '' INT TERM HUP; cat >/dev/null; [ -f " + pid_file + " ] && kill -9 $(cat " + pid_file +
                                    ") 2>/dev/null; sleep 0.2; rm -rf " + quote(dir_.string());
        const char* argv[] = {"/bin/sh", "-c", cleanup.c_str(), nullptr};
        int channel[2];
        if (::pipe2(channel, O_CLOEXEC) != 0) throw std::runtime_error("mariadb_server: pipe2 failed");
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
            throw std::runtime_error("mariadb_server: fork failed");
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

    commits durability_;
    std::filesystem::path dir_;
    int port_ = 0;
    pid_t watchdog_ = -1;
    int watchdog_pipe_ = -1;
};

}  // namespace seqinbox::test
