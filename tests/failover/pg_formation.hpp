#pragma once
// A throwaway pg_auto_failover formation for tests: a monitor, a primary and a synchronous
// standby (PostgreSQL 15, pg_autoctl 2.0), each a `pg_autoctl` service on 127.0.0.1 at a free
// port, with trust authentication and no TLS, all data under one fresh directory of the system
// temp dir. The services run as the `postgres` user when the tests run as root (pg_autoctl and
// initdb refuse root), with HOME and the XDG directories inside that directory, so that nothing
// outside it is touched. Commits are durable: the formation's defaults (synchronous_commit on,
// synchronous_standby_names naming the standby, fsync on).
//
// As with pg_server.hpp, a watchdog process (support/watchdog_process.hpp) waits for the owner to
// go away and then stops the services, kills what is left and removes the directory; the
// directory records its owner's pid, and the next formation removes those of owners that died
// (support/server_directory.hpp).
//
// Binaries: pg_autoctl from PATH (/usr/bin), PostgreSQL's from SEQINBOX_PG_BIN or
// /usr/lib/postgresql/15/bin.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "support/process.hpp"
#include "support/server_directory.hpp"
#include "support/shell_command.hpp"
#include "support/spawn.hpp"
#include "support/unused_port.hpp"
#include "support/wait_until.hpp"
#include "support/watchdog_process.hpp"

namespace seqinbox::test {

class pg_formation {
public:
    /// What the monitor says of one data node.
    struct node_state {
        std::string reported, assigned;  ///< e.g. "primary", "secondary", "wait_primary"
    };
    static constexpr int nodes = 2;

    pg_formation() {
        remove_abandoned_directories(directory_prefix, run_cleanup_script);
        dir_ = make_server_directory(directory_prefix, "postgres", "pg_formation");
        try {
            watchdog_.start(cleanup_script(dir_), "pg_formation");
            monitor_port_ = unused_port();
            for (auto& p : ports_) p = unused_port();
            start("monitor", {"create", "monitor", "--pgdata", data_dir("monitor"), "--pgport", std::to_string(monitor_port_),
                              "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"});
            require(wait_until([&] { return monitor_answers(); }, std::chrono::seconds(60)), "the monitor did not start");
            quicken_monitor();
            // The first node becomes "single", then primary once the second one follows it.
            start_node(0);
            require(wait_until([&] { return states().size() == 1 && states()[0].reported == "single"; }, std::chrono::seconds(120)),
                    "node 1 did not start as a single node");
            start_node(1);
            require(wait_until([&] { return in_sync(0); }, std::chrono::seconds(180)), "node 2 did not become node 1's standby");
        } catch (...) {
            stop_and_remove();
            throw;
        }
    }

    pg_formation(const pg_formation&) = delete;
    pg_formation& operator=(const pg_formation&) = delete;

    ~pg_formation() { stop_and_remove(); }  // then watchdog_ ends

    const std::filesystem::path& directory() const noexcept { return dir_; }
    int port(int node) const { return ports_.at(static_cast<std::size_t>(node)); }

    /// The formation's multi-host URI for `dbname`, as `pg_autoctl show uri` gives it: libpq
    /// tries both nodes and keeps the one that accepts writes.
    std::string uri(const std::string& dbname = "postgres") const {
        return "postgresql://postgres@127.0.0.1:" + std::to_string(ports_[0]) + ",127.0.0.1:" + std::to_string(ports_[1]) + "/" + dbname +
               "?target_session_attrs=read-write&connect_timeout=2";
    }

    /// The same in key=value form (SOCI sessions of the tests take no URI).
    std::string multi_host(const std::string& dbname = "postgres") const {
        return "host=127.0.0.1,127.0.0.1 port=" + std::to_string(ports_[0]) + "," + std::to_string(ports_[1]) + " dbname=" + dbname +
               " user=postgres target_session_attrs=read-write connect_timeout=2";
    }

    /// Node `node` alone, whatever its role.
    std::string conninfo(int node, const std::string& dbname = "postgres") const {
        return "host=127.0.0.1 port=" + std::to_string(port(node)) + " dbname=" + dbname + " user=postgres connect_timeout=2";
    }

    /// Creates a fresh database on the primary (the standby replays it) and returns its URI.
    std::string create_database() {
        static int counter = 0;
        const std::string name = "seqinbox_failover_" + std::to_string(++counter);
        soci::session admin(soci::postgresql, multi_host());
        admin << "CREATE DATABASE " + name;
        return uri(name);
    }

    /// The data nodes' states by node (0, 1), as the monitor has them; empty while it cannot say.
    std::vector<node_state> states() const {
        std::vector<node_state> found;
        try {
            soci::session monitor(soci::postgresql, monitor_conninfo());
            soci::rowset<soci::row> rows =
                (monitor.prepare << "SELECT reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid");
            for (const auto& row : rows) found.push_back({row.get<std::string>(0), row.get<std::string>(1)});
        } catch (const soci::soci_error&) {
            found.clear();
        }
        return found;
    }

    /// Health checks every second, a node unhealthy after 2 s without a report, and a primary
    /// that does not confirm its demotion taken for demoted after 5 s (defaults: 5 s, 20 s, 30 s),
    /// so that a failover takes seconds, not a minute.
    void quicken_monitor() const {
        soci::session monitor(soci::postgresql, monitor_conninfo());
        for (const char* setting : {"health_check_period = 1000", "health_check_timeout = 1000", "health_check_max_retries = 1",
                                    "health_check_retry_delay = 500", "node_considered_unhealthy_timeout = 2000",
                                    "primary_demote_timeout = 5000"})
            monitor << std::string("ALTER SYSTEM SET pgautofailover.") + setting;
        monitor << "SELECT pg_reload_conf()";
    }

    bool monitor_answers() const {
        try {
            soci::session monitor(soci::postgresql, monitor_conninfo());
            monitor << "SELECT count(*) FROM pgautofailover.node";
            return true;
        } catch (const soci::soci_error&) {
            return false;
        }
    }

    /// Node `primary` is the primary and the other its synchronous standby, settled.
    bool in_sync(int primary) const {
        const auto s = states();
        return s.size() == nodes && s[primary].reported == "primary" && s[primary].assigned == "primary" &&
               s[1 - primary].reported == "secondary" && s[1 - primary].assigned == "secondary";
    }

    /// The node the monitor holds for primary (assigned), or -1.
    int primary() const {
        const auto s = states();
        for (int n = 0; n < static_cast<int>(s.size()); ++n)
            if (s[n].assigned == "primary" || s[n].assigned == "wait_primary") return n;
        return -1;
    }

    /// The node that answers the URI read-write now, or -1.
    int writable() const {
        try {
            soci::session s(soci::postgresql, multi_host());
            int port = 0;
            s << "SELECT inet_server_port()", soci::into(port);
            return port == ports_[0] ? 0 : port == ports_[1] ? 1 : -1;
        } catch (const soci::soci_error&) {
            return -1;
        }
    }

    /// Stops (SIGSTOP) or resumes the pg_autoctl processes of `node`, not its PostgreSQL: a
    /// paused keeper neither restarts a PostgreSQL that died nor reports to the monitor, which
    /// then fails over once its health checks find the node down (as when its host fails).
    void pause_keeper(int node, bool pause) const {
        const pid_t top = keepers_.at(static_cast<std::size_t>(node + 1));
        for (const pid_t pid : children_of(top)) ::kill(pid, pause ? SIGSTOP : SIGCONT);
        ::kill(top, pause ? SIGSTOP : SIGCONT);
    }

    /// The pid in the postmaster.pid of `node` (0: none), which stays after a SIGKILL until
    /// its keeper starts PostgreSQL again.
    pid_t postmaster(int node) const { return postmaster_pid(data_dir("node" + std::to_string(node + 1))); }

    /// The services' logs, for failure messages.
    std::string logs() const {
        std::string text;
        for (const char* name : {"monitor", "node1", "node2"}) {
            std::ifstream in(dir_ / (std::string(name) + ".log"));
            text += std::string("==== ") + name + "\n" + std::string(std::istreambuf_iterator<char>(in), {});
        }
        return text;
    }

    /// Copies the services' logs to a file that outlives the formation; its path.
    std::filesystem::path keep_logs() const {
        const auto kept = temp_root() / ("seqinbox-formation-logs-" + std::to_string(::getpid()) + ".txt");
        std::ofstream(kept) << logs();
        return kept;
    }

private:
    static constexpr const char* directory_prefix = "seqinbox-pgaf-";

    void require(bool ok, const std::string& what) const {
        if (!ok) throw std::runtime_error("pg_formation: " + what + "; the services' logs: " + keep_logs().string());
    }

    std::string monitor_conninfo() const {
        return "host=127.0.0.1 port=" + std::to_string(monitor_port_) + " dbname=pg_auto_failover user=postgres connect_timeout=2";
    }

    static std::string pg_bin() {
        const char* dir = std::getenv("SEQINBOX_PG_BIN");
        return dir != nullptr ? dir : "/usr/lib/postgresql/15/bin";
    }

    std::string data_dir(const std::string& name) const { return (dir_ / name).string(); }

    void start_node(int node) {
        const std::string monitor = "postgres://autoctl_node@127.0.0.1:" + std::to_string(monitor_port_) + "/pg_auto_failover?sslmode=disable";
        const std::string name = "node" + std::to_string(node + 1);
        start(name, {"create", "postgres", "--pgdata", data_dir(name), "--pgport", std::to_string(port(node)), "--hostname", "127.0.0.1",
                     "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--monitor", monitor, "--run"});
    }

    /// Starts `pg_autoctl arguments...` as the owner, its output in <name>.log, its pid recorded
    /// in keepers (for the watchdog).
    void start(const std::string& name, std::vector<std::string> arguments) {
        arguments.insert(arguments.begin(), "pg_autoctl");
        const int log = ::open((dir_ / (name + ".log")).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log < 0) throw std::runtime_error("pg_formation: cannot open the log of " + name);
        spawn_setup setup;
        setup.output = log;
        setup.user = owner();
        setup.directory = dir_.string();
        setup.environment = environment();
        const pid_t pid = spawn("/usr/bin/pg_autoctl", std::move(arguments), std::move(setup));
        ::close(log);
        if (pid < 0) throw std::runtime_error("pg_formation: fork failed");
        keepers_.push_back(pid);
        std::ofstream(dir_ / "keepers", std::ios::app) << pid << '\n';
    }

    /// The services' environment: HOME and the XDG directories inside the formation's directory.
    std::vector<std::string> environment() const {
        const std::string d = dir_.string();
        return {"PATH=" + pg_bin() + ":/usr/bin:/bin", "HOME=" + d, "XDG_CONFIG_HOME=" + d + "/config",
                "XDG_DATA_HOME=" + d + "/share", "XDG_RUNTIME_DIR=" + d + "/run",
                "PG_REGRESS_SOCK_DIR=" + d, "PGHOST=127.0.0.1", "LANG=C"};
    }

    /// The postgres user when we are root (pg_autoctl and initdb refuse root); ourselves otherwise.
    static std::optional<spawn_setup::identity> owner() {
        const passwd* pw = running_as_root() ? ::getpwnam("postgres") : nullptr;
        if (pw == nullptr) return std::nullopt;
        return spawn_setup::identity{pw->pw_uid, pw->pw_gid};
    }

    /// The pg_autoctl services `parent` started (its direct children named pg_autoctl).
    static std::vector<pid_t> children_of(pid_t parent) {
        std::vector<pid_t> found;
        std::ifstream list("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
        for (pid_t pid = 0; list >> pid;) {
            std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
            std::string name;
            if (std::getline(comm, name) && name.starts_with("pg_autoctl")) found.push_back(pid);
        }
        return found;
    }

    static pid_t postmaster_pid(const std::string& data) { return pid_in_file(std::filesystem::path(data) / "postmaster.pid"); }

    /// What the watchdog, stop_and_remove and the removal of stale formations run on `dir`: each
    /// service asked to stop (SIGTERM: pg_autoctl stops its PostgreSQL), then whatever is left
    /// killed, then the directory removed.
    static std::string cleanup_script(const std::filesystem::path& dir) {
        const std::string d = "'" + dir.string() + "'";
        return "k=$(cat " + d + "/keepers 2>/dev/null); for p in $k; do kill -CONT $p $(cat /proc/$p/task/$p/children 2>/dev/null) 2>/dev/null; done; "
               "[ -n \"$k\" ] && kill -TERM $k 2>/dev/null; "
               "for i in $(seq 100); do alive=; for p in $k; do kill -0 $p 2>/dev/null && alive=1; done; [ -z \"$alive\" ] && break; sleep 0.1; done; "
               "[ -n \"$k\" ] && kill -KILL $k 2>/dev/null; "
               "for n in monitor node1 node2; do p=$(head -1 " + d + "/$n/postmaster.pid 2>/dev/null); [ -n \"$p\" ] && kill -QUIT $p 2>/dev/null; done; "
               "sleep 0.5; rm -rf " + d;
    }

    static void run_cleanup_script(const std::filesystem::path& dir) { run_logged(cleanup_script(dir), "/dev/null"); }

    void stop_and_remove() {
        if (dir_.empty()) return;
        run_cleanup_script(dir_);
        for (const pid_t pid : keepers_) ::waitpid(pid, nullptr, 0);
        keepers_.clear();
        dir_.clear();
    }

    std::filesystem::path dir_;
    int monitor_port_ = 0;
    std::array<int, nodes> ports_{};
    std::vector<pid_t> keepers_;
    watchdog_process watchdog_;
};

}  // namespace seqinbox::test
