#pragma once
// A throwaway PgBouncer 1.18 in transaction pooling mode in front of a throwaway PostgreSQL
// (tests/postgresql/pg_server.hpp), for the topology tests: an ini file in a fresh directory under
// the system temp dir, listening on 127.0.0.1 at a free port, every database of the server
// reachable under its own name (the `*` entry), trust authentication (the user still has to be
// in the auth_file), and a server pool per database smaller than the clients the tests open, so
// that clients share server connections transaction by transaction and queue for them.
//
// Cleanup follows pg_server: when root, PgBouncer runs as the `postgres` user; a watchdog process
// (support/watchdog_process.hpp) stops PgBouncer and removes the directory when its owner goes
// away, however it ends; every directory records its owner's pid, and the next pgbouncer_server
// removes those of owners that no longer exist (support/server_directory.hpp).
//
// Usage: pgbouncer_server bouncer(pg_server::shared(), {.pool_size = 4});
//        store_options.conninfo = bouncer.conninfo("mydb");
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <libpq-fe.h>

#include "postgresql/pg_server.hpp"
#include "support/process.hpp"
#include "support/server_directory.hpp"
#include "support/shell_command.hpp"
#include "support/unused_port.hpp"
#include "support/wait_until.hpp"
#include "support/watchdog_process.hpp"

namespace seqinbox::test {

struct pgbouncer_settings {
    /// default_pool_size: server connections per database (and user).
    int pool_size = 4;
    /// max_client_conn: clients PgBouncer accepts at once.
    int max_clients = 200;
    /// idle_transaction_timeout in seconds: PgBouncer closes a server connection whose transaction
    /// idles this long (0: never, PgBouncer's default).
    int idle_transaction_timeout = 0;
};

class pgbouncer_server {
public:
    using settings = pgbouncer_settings;

    explicit pgbouncer_server(const pg_server& server, settings s = {}) : settings_(s) {
        remove_abandoned_directories(directory_prefix, kill_and_remove);
        dir_ = make_server_directory(directory_prefix, "postgres", "pgbouncer_server");
        try {
            write_auth_file();
            const auto start = [&] {
                write_ini(server.port());
                return try_start();
            };
            if (!start_on_unused_port(port_, start)) throw std::runtime_error("pgbouncer_server: pgbouncer did not start:\n" + read_log());
            start_watchdog();
        } catch (...) {
            stop_and_remove();
            throw;
        }
    }

    pgbouncer_server(const pgbouncer_server&) = delete;
    pgbouncer_server& operator=(const pgbouncer_server&) = delete;

    ~pgbouncer_server() { stop_and_remove(); }  // then watchdog_ ends

    int port() const noexcept { return port_; }
    int pool_size() const noexcept { return settings_.pool_size; }
    const std::filesystem::path& directory() const noexcept { return dir_; }
    pid_t watchdog() const noexcept { return watchdog_.pid(); }

    /// Conninfo of database `name` through PgBouncer.
    std::string conninfo(const std::string& name = "postgres") const {
        return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + name + " user=postgres";
    }

    /// The same database through PgBouncer instead of directly: `direct` is a pg_server conninfo.
    std::string through(const std::string& direct) const {
        const auto at = direct.find("dbname=");
        if (at == std::string::npos) throw std::invalid_argument("pgbouncer_server: no dbname in " + direct);
        const auto end = direct.find(' ', at);
        return conninfo(direct.substr(at + 7, end == std::string::npos ? std::string::npos : end - at - 7));
    }

    /// `command` (PAUSE, RESUME, ...) on the admin console; false when it failed or took longer
    /// than `patience` (the console connection is then dropped; RESUME undoes a PAUSE).
    bool admin_command(const std::string& command, std::chrono::seconds patience) const {
        const std::unique_ptr<PGconn, decltype(&PQfinish)> admin(PQconnectdb(conninfo("pgbouncer").c_str()), &PQfinish);
        if (PQstatus(admin.get()) != CONNECTION_OK || PQsendQuery(admin.get(), command.c_str()) != 1) return false;
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (PQisBusy(admin.get()) == 1) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (PQconsumeInput(admin.get()) != 1) return false;
        }
        bool ok = true;
        while (PGresult* r = PQgetResult(admin.get())) {
            ok = ok && PQresultStatus(r) == PGRES_COMMAND_OK;
            PQclear(r);
        }
        return ok;
    }

    /// `SHOW <what>` on the admin console (simple protocol only): a row per line, each as column
    /// name -> value.
    std::vector<std::map<std::string, std::string>> show(const std::string& what) const {
        const std::unique_ptr<PGconn, decltype(&PQfinish)> admin(PQconnectdb(conninfo("pgbouncer").c_str()), &PQfinish);
        if (PQstatus(admin.get()) != CONNECTION_OK)
            throw std::runtime_error("pgbouncer_server: admin console: " + std::string(PQerrorMessage(admin.get())));
        const std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(admin.get(), ("SHOW " + what).c_str()), &PQclear);
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK)
            throw std::runtime_error("pgbouncer_server: SHOW " + what + ": " + PQresultErrorMessage(r.get()));
        std::vector<std::map<std::string, std::string>> rows(static_cast<std::size_t>(PQntuples(r.get())));
        for (int i = 0; i < PQntuples(r.get()); ++i)
            for (int c = 0; c < PQnfields(r.get()); ++c) rows[static_cast<std::size_t>(i)][PQfname(r.get(), c)] = PQgetvalue(r.get(), i, c);
        return rows;
    }

    /// Transactions PgBouncer passed to the server so far, over every database (SHOW STATS):
    /// proof that a test's traffic went through it.
    long long transactions() const {
        long long n = 0;
        for (auto& row : show("STATS"))
            if (row["database"] != "pgbouncer") n += std::stoll(row["total_xact_count"]);
        return n;
    }

private:
    static constexpr const char* directory_prefix = "seqinbox-pgbouncer-";

    std::string path(const char* name) const { return (dir_ / name).string(); }

    std::string read_log() const { return read_files(dir_, {"commands.log", "pgbouncer.log"}); }

    void write_auth_file() const { std::ofstream(dir_ / "userlist.txt") << "\"postgres\" \"\"\n"; }

    void write_ini(int server_port) const {
        std::ofstream ini(dir_ / "pgbouncer.ini", std::ios::trunc);
        ini << "[databases]\n"
            << "* = host=127.0.0.1 port=" << server_port << "\n"
            << "[pgbouncer]\n"
            << "listen_addr = 127.0.0.1\nlisten_port = " << port_ << "\n"
            << "unix_socket_dir = " << dir_.string() << "\n"
            << "auth_type = trust\nauth_file = " << path("userlist.txt") << "\n"
            << "admin_users = postgres\n"
            << "pool_mode = transaction\n"
            << "default_pool_size = " << settings_.pool_size << "\nmin_pool_size = 0\nreserve_pool_size = 0\n"
            << "max_client_conn = " << settings_.max_clients << "\n"
            << "idle_transaction_timeout = " << settings_.idle_transaction_timeout << "\n"
            << "logfile = " << path("pgbouncer.log") << "\npidfile = " << path("pgbouncer.pid") << "\n";
    }

    /// Starts PgBouncer daemonized and waits until its admin console answers.
    bool try_start() const {
        if (!run_logged(as_user("postgres", "pgbouncer -d " + shell_quote(path("pgbouncer.ini"))), path("commands.log"))) return false;
        return wait_until([&] { return admin_console_answers(); }, std::chrono::seconds(20), std::chrono::milliseconds(20));
    }

    bool admin_console_answers() const {
        const std::unique_ptr<PGconn, decltype(&PQfinish)> c(PQconnectdb(conninfo("pgbouncer").c_str()), &PQfinish);
        return PQstatus(c.get()) == CONNECTION_OK;
    }

    /// Stops the PgBouncer recorded in `dir` (SIGTERM: immediate shutdown) and removes `dir`.
    static void kill_and_remove(const std::filesystem::path& dir) {
        stop_process(pid_in_file(dir / "pgbouncer.pid"), SIGTERM, std::chrono::seconds(2));
        remove_directory(dir);
    }

    /// The watchdog stops PgBouncer (SIGTERM, then SIGKILL a second later) and removes the directory.
    void start_watchdog() {
        const std::string pid_file = shell_quote(path("pgbouncer.pid"));
        watchdog_.start("pid=$(cat " + pid_file +
                            " 2>/dev/null); if [ -n \"$pid\" ]; then kill -TERM $pid; sleep 1; kill -0 $pid && kill -KILL $pid; fi 2>/dev/null; rm -rf " +
                            shell_quote(dir_.string()),
                        "pgbouncer_server");
    }

    void stop_and_remove() {
        if (dir_.empty()) return;
        kill_and_remove(dir_);
        dir_.clear();
    }

    settings settings_;
    std::filesystem::path dir_;
    int port_ = 0;
    watchdog_process watchdog_;
};

}  // namespace seqinbox::test
