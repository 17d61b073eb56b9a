#pragma once
// What the relay tests share: a world of a throwaway database, a mock cluster with the input,
// output and dead-letter topics and the declaration file, and the check of the output topic.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "kafka/kafka_world.hpp"
#include "postgresql/pg_test_support.hpp"
#include "relay/relay_setup.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "support/order_check.hpp"
#include "support/print_record_bytes.hpp"

namespace seqinbox::test {

inline long long count(const std::string& conninfo, const std::string& sql) {
    soci::session db(soci::postgresql, conninfo);
    return test::count(db, sql);
}

/// Waits until `sql` counts at least `n`.
inline bool wait_for_count(const std::string& conninfo, const std::string& sql, long long n,
                           std::chrono::seconds patience = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (count(conninfo, sql) < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return count(conninfo, sql) >= n;
}

/// A throwaway database on `server`, a mock cluster with the three topics, and the declaration file.
struct relay_world {
    explicit relay_world(pg_server& server = pg_server::shared()) : relay_world(server.create_database()) { this->server = &server; }
    /// The same on an existing database elsewhere (a failover formation's): no server to refuse connections.
    explicit relay_world(std::string database) : conninfo(std::move(database)), dir(scratch_dir()) {
        postgresql::migrate(conninfo);
        cluster.create_topic(input, input_partitions);
        cluster.create_topic(output, output_partitions);
        cluster.create_topic(dead_letters, 1);
        std::ofstream(dir / "orders.yaml") << declarations_yaml;
    }
    ~relay_world() { std::filesystem::remove_all(dir); }

    static std::filesystem::path scratch_dir() {
        auto path = std::filesystem::temp_directory_path() / ("seqinbox-relay-test-" + std::to_string(::getpid()) + "-" +
                                                              std::to_string(next_dir++));
        std::filesystem::create_directories(path);
        return path;
    }

    std::vector<std::string> arguments(const std::string& group = "relay-test", int threads = 2) const {
        auto arguments = relay_arguments(dir / "orders.yaml", conninfo, cluster.bootstraps(), group, threads);
        arguments.insert(arguments.end(), {"--actions-every", "200ms", "--housekeeping-every", "1s", "--removal-delay", "1h"});
        return arguments;
    }

    long long published() const {
        const auto ends = cluster.end_offsets(output, output_partitions);
        return std::accumulate(ends.begin(), ends.end(), 0LL);
    }

    /// Waits until at least `n` records are on the output topic.
    bool wait_for_output(long long n, std::chrono::seconds patience = std::chrono::seconds(90)) const {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (published() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return published() >= n;
    }

    /// Waits until `group` committed the end of the input topic (up to `patience`), then until
    /// `logical` messages are PROCESSED (the last releases follow the last commit; up to 20 s).
    /// Whether the end of the input was committed.
    bool wait_for_input_decided(const std::string& group, long long logical,
                                std::chrono::seconds patience = std::chrono::seconds(120)) const {
        testing::committed_watch input_done(cluster, group, input, input_partitions);
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (!input_done.reached() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        wait_for_count(conninfo, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'", logical, std::chrono::seconds(20));
        return input_done.reached();
    }

    /// Makes the database refuse every connection and ends the open ones, or lets them in again.
    void refuse_connections(bool refuse) const {
        soci::session admin(soci::postgresql, server->conninfo());
        admin << "ALTER DATABASE " + database_name() + " ALLOW_CONNECTIONS " + (refuse ? "false" : "true");
        if (refuse) terminate_connections();
    }

    /// Ends every open connection to the database (the relay reconnects); how many were ended.
    /// Returns once the ended backends have left pg_stat_activity (pg_terminate_backend() only
    /// signals them), so that a connection counted afterwards is a new one, not one still exiting.
    long long terminate_connections() const {
        soci::session admin(soci::postgresql, server->conninfo());
        const std::string ours = "FROM pg_stat_activity WHERE datname = '" + database_name() + "' AND pid <> pg_backend_pid()";
        admin << "CREATE TEMP TABLE ended AS SELECT pid " + ours;  // this session's own table
        const auto ended = test::count(admin, "SELECT count(pg_terminate_backend(pid)) FROM ended");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (test::count(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid IN (SELECT pid FROM ended)") > 0 &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return ended;
    }

    std::string database_name() const {
        const auto from = conninfo.find("dbname=") + 7;
        return conninfo.substr(from, conninfo.find(' ', from) - from);
    }

    static inline int next_dir = 0;
    pg_server* server = nullptr;
    std::string conninfo;
    testing::mock_cluster cluster;
    std::filesystem::path dir;
};

/// The text of header `name` of `record` ("" when absent).
inline std::string header_of(const envelope& record, std::string_view name) { return std::string(record.find_header(name).value_or("")); }

/// The output records: every logical message, repeated at most `allowed_repeats` times in all,
/// each context in declared order, with the original key, value and headers.
inline void expect_in_declared_order(const std::vector<envelope>& records, const testing::order_workload& work,
                                     std::size_t allowed_repeats = 0) {
    std::map<std::pair<std::string, std::string>, int> copies;
    std::map<std::string, std::vector<std::string>> order;  // context -> types in output order
    for (const auto& r : records) {
        const std::string type(r.find_header("message-type").value_or(""));
        const std::string id(r.find_header("idempotence-id").value_or(""));
        ++copies[{type, id}];
        order[r.key.value_or("")].push_back(type);
        BOOST_TEST(r.value == type + ":" + id, "value kept");
        BOOST_TEST(id == type + "@" + r.key.value_or(""), "key kept");
    }
    BOOST_TEST(copies.size() == work.logical);
    BOOST_TEST_MESSAGE(records.size() << " output records, " << records.size() - copies.size() << " repeated");
    BOOST_TEST(records.size() - copies.size() <= allowed_repeats, records.size() - copies.size() << " repeated records");
    const auto decls = testing::order_declarations();
    std::size_t out_of_order = 0;
    for (const auto& context : work.contexts)
        if (const auto violation = testing::order_violation(decls, order[context]); !violation.empty())
            if (out_of_order++ == 0) BOOST_TEST_MESSAGE(context << ": " << violation);
    BOOST_TEST(out_of_order == 0u);
}

}  // namespace seqinbox::test
