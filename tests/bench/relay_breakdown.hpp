#pragma once
// bench_relay's breakdown of a relay run per batch: the relay's own timings (its `relay batches:`
// log line at stop: batches, records, the store's round trips, the consumer threads' time
// polling, deciding, awaiting the broker's acknowledgements and committing), what the relay's
// database connections were doing (pg_stat_activity sampled every few milliseconds: waiting for
// a lock, for I/O (the commit's WAL flush), running, or idle inside a transaction while the relay
// works or waits), and the CPU time of the relay process and of its server processes.
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench/bench_support.hpp"

namespace seqinbox::bench {

/// The CPU seconds (user + system) process `pid` used so far; 0 when it is gone.
inline double cpu_seconds_of(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto after_name = text.rfind(')');  // the name may hold spaces
    if (after_name == std::string::npos) return 0;
    std::istringstream fields(text.substr(after_name + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; fields >> field && i <= 15; ++i)  // fields 14 and 15: utime, stime
        if (i >= 14) ticks += std::stod(field);
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// Samples what the server processes of one database do, on a thread of its own, until stopped.
class activity_sampler {
public:
    static constexpr std::chrono::milliseconds interval{10};

    explicit activity_sampler(const std::string& conninfo) : session_(soci::postgresql, conninfo) {
        thread_ = std::thread([this] { run(); });
    }
    ~activity_sampler() { stop(); }
    activity_sampler(const activity_sampler&) = delete;
    activity_sampler& operator=(const activity_sampler&) = delete;

    void stop() {
        if (thread_.joinable()) {
            stopping_ = true;
            thread_.join();
        }
    }

    /// Connection-seconds per activity: lock (waiting for a row lock: another batch's instance
    /// or claim), io (mostly the commit's WAL flush), running, in_transaction (idle in a
    /// transaction: the relay deciding or waiting for the broker).
    std::map<std::string, double> seconds() const {
        std::map<std::string, double> s;
        for (const auto& [what, n] : samples_) s[what] = static_cast<double>(n) * elapsed_ / static_cast<double>(std::max<std::size_t>(rounds_, 1));
        return s;
    }

    /// Samples taken: each is one transaction of the database (pg_stat_database counts it).
    std::size_t samples() const noexcept { return rounds_; }

    /// The CPU seconds of the server processes seen serving the database.
    double server_cpu_seconds() const {
        double total = 0;
        for (const pid_t pid : pids_) total += cpu_seconds_of(pid);
        return total;
    }

private:
    void run() {
        const auto started = clock_type::now();
        while (!stopping_) {
            sample();
            ++rounds_;
            std::this_thread::sleep_for(interval);
        }
        elapsed_ = elapsed_s(started, clock_type::now());
    }

    void sample() {
        soci::rowset<soci::row> rows = (session_.prepare << "SELECT pid, state, coalesce(wait_event_type, '') FROM pg_stat_activity"
                                                           " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                                                           " AND backend_type = 'client backend'");
        for (const auto& row : rows) {
            pids_.insert(row.get<int>(0));
            const std::string state = row.get_indicator(1) == soci::i_null ? "" : row.get<std::string>(1);
            const std::string wait = row.get<std::string>(2);
            if (state == "active") ++samples_[wait == "Lock" ? "lock" : wait == "IO" || wait == "LWLock" ? "io" : "running"];
            else if (state.starts_with("idle in transaction")) ++samples_["in_transaction"];
        }
    }

    soci::session session_;
    std::thread thread_;
    std::atomic<bool> stopping_{false};
    std::map<std::string, std::size_t> samples_;
    std::set<pid_t> pids_;
    std::size_t rounds_ = 0;
    double elapsed_ = 0;
};

/// The `name: value` pairs after `relay batches:` in a relay's log; empty without that line.
inline std::map<std::string, double> relay_batch_line(const std::string& log) {
    std::map<std::string, double> values;
    const auto at = log.find("relay batches: ");
    if (at == std::string::npos) return values;
    std::istringstream line(log.substr(at + 6, log.find('\n', at) - at - 6));  // from "batches: "
    std::string name;
    double value = 0;
    while (line >> name >> value) values[name.substr(0, name.size() - 1)] = value;
    return values;
}

}  // namespace seqinbox::bench
