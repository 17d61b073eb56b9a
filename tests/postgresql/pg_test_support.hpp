#pragma once
// Helpers shared by the PostgreSQL tests: a migrated database per test case, small queries.
#include <string>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "pg_server.hpp"
#include "seqinbox/postgresql/migrate.hpp"

namespace seqinbox::test {

/// The version of the script that creates the claim table (the upgrade path starts before it).
inline int claim_table_version() {
    for (const auto& script : postgresql::schema_scripts())
        if (script.sql.find("CREATE TABLE sequential_inbox_idempotence") != std::string_view::npos) return script.version;
    throw std::logic_error("no schema script creates sequential_inbox_idempotence");
}

inline long long count(soci::session& session, const std::string& query) {
    long long n = -1;
    session << query, soci::into(n);
    return n;
}

inline bool table_exists(soci::session& session, const std::string& table) {
    return count(session, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = '" + table + "'") == 1;
}

/// A new OPEN sequence instance; returns its id.
inline long long create_instance(soci::session& session, const std::string& name, const std::string& context_id) {
    long long id = 0;
    session << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)"
               " VALUES (:n, :c, 'OPEN', now(), now() + interval '1 day') RETURNING id",
        soci::use(name), soci::use(context_id), soci::into(id);
    return id;
}

/// Makes instance `id` due for removal, as the expiry marking would; removal_condition::expired
/// at the current time then holds for it.
inline void mark_due_for_removal(const std::string& conninfo, long long id) {
    soci::session s(soci::postgresql, conninfo);
    s << "UPDATE sequence_instance SET remove_after = now() - interval '1 second' WHERE id = :id", soci::use(id);
}

}  // namespace seqinbox::test
