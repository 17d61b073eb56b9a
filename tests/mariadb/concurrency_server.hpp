#pragma once
// What tests/postgresql/concurrency_cases.hpp asks of the server (see
// tests/postgresql/concurrency_server.hpp), for MariaDB: a throwaway mariadbd, waiters seen in
// information_schema.processlist, the claim's holder found through innodb_lock_waits and ended by
// KILL CONNECTION. And the route: the store connects directly.
#include <chrono>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <thread>

#include "mariadb_server.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace seqinbox::test {

struct mariadb_concurrency_server {
    using store_type = mariadb::store;

    static std::string migrated_database() {
        std::string url = mariadb_server::shared().create_database();
        mariadb::migrate(url);
        return url;
    }
    static const soci::backend_factory& backend() { return soci::mysql; }
    static std::string soci_connect(const std::string& url) {
        return mariadb_server::shared().soci_connect(mariadb_server::database_of(url));
    }

    // Sessions of this database inside a claim insert: while a claim is held, one that stays
    // there waits. (information_schema.innodb_trx lists a waiting insert only once it has
    // modified a row: of 15 waiters it showed 1.)
    static std::string count_claim_waiters() {
        return "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()"
               " AND command = 'Query' AND info LIKE 'INSERT INTO sequential_inbox_idempotence%'";
    }
    // InnoDB's information_schema tables are a copy, refreshed by a read that comes 100 ms or more
    // after the previous read (which restarts that clock): a read soon after the previous test
    // case's shows its waits, between sessions gone since (seen: KILL of an unknown thread id),
    // and reads 20 ms apart never see anything newer. So: reads 150 ms apart, and only a wait of
    // a session inside a claim insert now, on a live session of this database, counts.
    static long long claim_holder(soci::session& session) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            long long holder = 0;
            soci::indicator found = soci::i_null;
            session << "SELECT MIN(b.trx_mysql_thread_id) FROM information_schema.innodb_lock_waits w"
                       " JOIN information_schema.innodb_trx r ON r.trx_id = w.requesting_trx_id"
                       " JOIN information_schema.innodb_trx b ON b.trx_id = w.blocking_trx_id"
                       " JOIN information_schema.processlist rp ON rp.id = r.trx_mysql_thread_id AND rp.db = DATABASE()"
                       "  AND rp.command = 'Query' AND rp.info LIKE '%INSERT INTO sequential_inbox_idempotence%'"
                       " JOIN information_schema.processlist bp ON bp.id = b.trx_mysql_thread_id AND bp.db = DATABASE()"
                       " WHERE r.trx_query LIKE '%INSERT INTO sequential_inbox_idempotence%'",
                soci::into(holder, found);
            if ((found == soci::i_ok && holder != 0) || std::chrono::steady_clock::now() > deadline) return holder;
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
        }
    }
    static bool kill(const std::string& url, long long connection) {
        soci::session admin(soci::mysql, soci_connect(url));
        admin << "KILL CONNECTION " + std::to_string(connection);
        return true;
    }

    static constexpr std::string_view lost_connection_text = "connection to MariaDB was lost";
    static constexpr std::string_view text_type = "VARCHAR(255)";
    static constexpr std::string_view connection_id_sql = "CONNECTION_ID()";
};

struct mariadb_route {
    static constexpr std::size_t server_connections = std::numeric_limits<std::size_t>::max();
    static mariadb::store_options store_options(const std::string& url, std::size_t pool_size) {
        return {.url = url, .pool_size = pool_size};
    }
};

}  // namespace seqinbox::test
