#pragma once
// The relay tests on MariaDB: relay_world's topics and declarations on a throwaway mariadbd's
// database, with the checks they make on it.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kafka/kafka_world.hpp"
#include "mariadb/mariadb_server.hpp"
#include "relay/relay_setup.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/mariadb/migrate.hpp"

namespace seqinbox::test {

/// Consumer threads, and records each decides in one transaction: with a crash, the repeats
/// stay within a batch per thread.
constexpr int mariadb_relay_threads = 2;
constexpr int mariadb_relay_batch = 20;

/// relay_world's topics and declarations on a fresh, migrated MariaDB database.
struct mariadb_relay_world {
    explicit mariadb_relay_world(mariadb_server& on = mariadb_server::shared())
        : server(&on), url(on.create_database()), dir(relay_world::scratch_dir()) {
        mariadb::migrate(url);
        cluster.create_topic(input, input_partitions);
        cluster.create_topic(output, output_partitions);
        cluster.create_topic(dead_letters, 1);
        std::ofstream(dir / "orders.yaml") << declarations_yaml;
    }
    ~mariadb_relay_world() { std::filesystem::remove_all(dir); }

    /// The relay's arguments, the database named by --database (the store-neutral flag).
    std::vector<std::string> arguments(const std::string& group, int batch = mariadb_relay_batch) const {
        auto arguments = relay_arguments(dir / "orders.yaml", url, cluster.bootstraps(), group, mariadb_relay_threads);
        for (auto& a : arguments)
            if (a == "--postgres") a = "--database";
        arguments.insert(arguments.end(), {"--batch-size", std::to_string(batch), "--actions-every", "200ms", "--housekeeping-every",
                                           "1s", "--removal-delay", "1h"});
        return arguments;
    }

    long long count(const std::string& sql) const {
        soci::session db(soci::mysql, server->soci_connect(mariadb_server::database_of(url)));
        long long n = 0;
        db << sql, soci::into(n);
        return n;
    }

    /// Ends every session on the database but this one (KILL CONNECTION); how many.
    long long kill_connections() const {
        soci::session admin(soci::mysql, server->soci_connect());
        std::vector<long long> ids(1000);
        admin << "SELECT id FROM information_schema.processlist WHERE db = :db AND id <> CONNECTION_ID()",
            soci::use(mariadb_server::database_of(url)), soci::into(ids);
        for (const auto id : ids) admin << "KILL CONNECTION " + std::to_string(id);
        return static_cast<long long>(ids.size());
    }

    long long published() const {
        long long n = 0;
        for (const auto end : cluster.end_offsets(output, output_partitions)) n += end;
        return n;
    }

    bool wait_for_output(long long n, std::chrono::seconds patience = std::chrono::seconds(60)) const {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (published() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return published() >= n;
    }

    /// Waits until every logical message is PROCESSED (the last ones follow their publication).
    bool wait_for_processed(long long n) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        const std::string sql = "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'";
        while (count(sql) < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return count(sql) >= n;
    }

    mariadb_server* server;
    std::string url;
    seqinbox::testing::mock_cluster cluster;
    std::filesystem::path dir;
};

}  // namespace seqinbox::test
