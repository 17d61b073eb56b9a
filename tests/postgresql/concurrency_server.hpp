#pragma once
// What concurrency_cases.hpp asks of the server, for PostgreSQL (a throwaway server, pg_server.hpp).
// A server type S gives:
//   S::store_type                      the store the cases share
//   S::migrated_database()             a fresh migrated database: its direct connection string
//   S::backend(), S::soci_connect(c)   a SOCI session on that database
//   S::count_claim_waiters()           a count query: connections waiting for a lock in a claim insert
//   S::claim_holder(session)           the connection holding the claim a waiter waits for
//   S::kill(c, id)                     ends that connection (true when it did)
//   S::lost_connection_text            what the store's error says of a lost connection
//   S::text_type, S::connection_id_sql a text column type and the current connection's id in SQL
#include <string>
#include <string_view>

#include "pg_test_support.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::test {

struct postgresql_concurrency_server {
    using store_type = postgresql::store;

    static std::string migrated_database() {
        std::string conninfo = pg_server::shared().create_database();
        postgresql::migrate(conninfo);
        return conninfo;
    }
    static const soci::backend_factory& backend() { return soci::postgresql; }
    static std::string soci_connect(const std::string& conninfo) { return conninfo; }

    static std::string count_claim_waiters() { return "SELECT count(DISTINCT a.pid) " + claim_waiters(); }
    static long long claim_holder(soci::session& session) {
        int holder = 0;
        session << "SELECT min(holder) FROM (SELECT unnest(pg_blocking_pids(a.pid)) AS holder " + claim_waiters() + ") h",
            soci::into(holder);
        return holder;
    }
    static bool kill(const std::string& conninfo, long long pid) {
        soci::session admin(soci::postgresql, conninfo);
        int terminated = 0;
        admin << "SELECT pg_terminate_backend(" + std::to_string(pid) + ")::int", soci::into(terminated);
        return terminated == 1;
    }

    static constexpr std::string_view lost_connection_text = "connection to PostgreSQL was lost";
    static constexpr std::string_view text_type = "text";
    static constexpr std::string_view connection_id_sql = "pg_backend_pid()";

private:
    /// Backends of this database waiting for a lock (pg_locks, not granted) inside a claim insert.
    static std::string claim_waiters() {
        return "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
               " WHERE NOT l.granted AND a.datname = current_database() AND a.pid <> pg_backend_pid()"
               " AND a.query ILIKE '%insert%sequential_inbox_idempotence%'";
    }
};

}  // namespace seqinbox::test
