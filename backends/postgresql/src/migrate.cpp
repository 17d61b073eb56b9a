// seqinbox::postgresql::migrate: see migrate.hpp.
#include "seqinbox/postgresql/migrate.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <soci/soci.h>

#include "connection.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::postgresql {

namespace {

// Advisory lock key shared by every seqinbox migrator: the bytes of "seqinbox".
constexpr std::int64_t migration_lock_key = 0x736571696e626f78;

constexpr std::string_view create_history =
    "CREATE TABLE IF NOT EXISTS seqinbox_schema_history ("
    " version integer NOT NULL PRIMARY KEY,"
    " name text NOT NULL,"
    " checksum text NOT NULL,"  // lowercase hex SHA-256 of the script
    " applied_at timestamp with time zone NOT NULL DEFAULT now())";

struct applied_script {
    std::string name;
    std::string checksum;
};

/// Holds the migration lock: an advisory lock of a transaction left open on a session of its
/// own, not a session lock, since through a transaction pooler a session's server connection
/// changes between transactions. The lock ends with the transaction: on release, or when the
/// migrator dies.
class migration_lock {
public:
    // Polled, each try a transaction of its own: a migrator blocked inside pg_advisory_xact_lock
    // would hold a snapshot that the holder's CREATE INDEX CONCURRENTLY (V7) waits for, a deadlock.
    migration_lock(const std::string& conninfo, std::chrono::milliseconds wait) : session_(detail::connect(conninfo)) {
        const auto deadline = std::chrono::steady_clock::now() + wait;
        for (auto pause = std::chrono::milliseconds(5);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
            if (try_take()) return;
            if (std::chrono::steady_clock::now() >= deadline)
                throw error(error_category::retryable,
                            "taking the schema migration lock on '" + redact_conninfo(conninfo) + "': another migration held it for " +
                                std::to_string(wait.count()) + " ms (SQLSTATE 55P03); retry",
                            "55P03");
            std::this_thread::sleep_for(pause);
        }
    }
    migration_lock(const migration_lock&) = delete;
    migration_lock& operator=(const migration_lock&) = delete;
    ~migration_lock() {
        try {
            session_->commit();
        } catch (const soci::soci_error&) {
            // the connection is gone, and the lock with it
        }
    }

private:
    /// Simple queries (no parameters): an extended-protocol SELECT leaves its portal, and with it
    /// a snapshot, open until the transaction's next statement, and CREATE INDEX CONCURRENTLY
    /// waits for every transaction that holds one. The idle-in-transaction timeout is lifted for
    /// the lock's transaction: it idles while the scripts run on the other session.
    bool try_take() {
        int got = 0;
        session_->begin();
        *session_ << "SELECT CAST(pg_try_advisory_xact_lock(" + std::to_string(migration_lock_key) + ") AS integer)", soci::into(got);
        if (got != 1) {
            session_->rollback();
            return false;
        }
        *session_ << "SET LOCAL idle_in_transaction_session_timeout = 0";
        return true;
    }

    std::unique_ptr<soci::session> session_;
};

std::map<int, applied_script> read_history(soci::session& session) {
    // One unnamed query (nothing prepared outlives it, as a transaction pooler needs), into
    // vectors sized beyond any history.
    constexpr std::size_t most_versions = 10'000;
    std::vector<int> versions(most_versions);
    std::vector<std::string> names(most_versions), checksums(most_versions);
    session << "SELECT version, name, checksum FROM seqinbox_schema_history", soci::into(versions), soci::into(names),
        soci::into(checksums);
    std::map<int, applied_script> history;
    for (std::size_t i = 0; i < versions.size(); ++i) history.emplace(versions[i], applied_script{names[i], checksums[i]});
    return history;
}

/// Refuses a database this library must not touch: newer than the library, or with an applied
/// script that differs from the embedded one.
void check_history(const std::map<int, applied_script>& history, const std::string& conninfo) {
    const auto where = " (database '" + redact_conninfo(conninfo) + "')";
    if (!history.empty() && history.rbegin()->first > latest_schema_version())
        throw error(error_category::schema_mismatch,
                    "the database schema is at version " + std::to_string(history.rbegin()->first) +
                        ", newer than this seqinbox library (schema version " +
                        std::to_string(latest_schema_version()) + ")" + where +
                        "; upgrade seqinbox to the version that migrated this database, or use another database");
    for (const auto& script : schema_scripts()) {
        auto it = history.find(script.version);
        if (it == history.end() || it->second.checksum == script.sha256) continue;
        throw error(error_category::schema_mismatch,
                    "schema script V" + std::to_string(script.version) + "__" + std::string(script.name) +
                        ".sql applied to the database differs from the one in this library (recorded SHA-256 " +
                        it->second.checksum + ", library " + std::string(script.sha256) + ")" + where +
                        "; released schema scripts must never change: restore the original script and add a new "
                        "version for the change");
    }
}

/// The first line of a script whose statements must run outside a transaction (CREATE INDEX
/// CONCURRENTLY): each is sent on its own, and such a script must be safe to run again after
/// stopping halfway.
constexpr std::string_view outside_transaction_marker = "-- seqinbox: each statement on its own, outside a transaction\n";

/// The statements of `sql`: each ends with ';' at the end of a line (comment lines are dropped).
std::vector<std::string> statements_of(std::string_view sql) {
    std::vector<std::string> statements;
    std::string current;
    for (std::size_t at = 0; at < sql.size();) {
        const std::size_t end = std::min(sql.find('\n', at), sql.size());
        const std::string_view line = sql.substr(at, end - at);
        at = end + 1;
        if (line.starts_with("--")) continue;
        current.append(line).push_back('\n');
        if (line.ends_with(';')) statements.push_back(std::exchange(current, {}));
    }
    if (current.find_first_not_of(" \n") != std::string::npos) statements.push_back(current);
    return statements;
}

void record_applied(soci::session& session, const schema_script& script) {
    const std::string name(script.name);
    const std::string checksum(script.sha256);
    session << "INSERT INTO seqinbox_schema_history (version, name, checksum) VALUES (:v, :n, :c)", soci::use(script.version),
        soci::use(name), soci::use(checksum);
}

void apply(soci::session& session, const schema_script& script) {
    if (script.sql.starts_with(outside_transaction_marker)) {
        for (const auto& statement : statements_of(script.sql)) session << statement;
        record_applied(session, script);
        return;
    }
    soci::transaction transaction(session);  // rolls back when the script fails
    // a statement without bound values runs as a simple query, so a script may hold many
    session << std::string(script.sql);
    record_applied(session, script);
    transaction.commit();
}

}  // namespace

migrate_report migrate(const std::string& conninfo, const migrate_options& options) {
    const int target = options.target_version.value_or(latest_schema_version());
    if (target < 0 || target > latest_schema_version())
        throw error(error_category::misuse, "migrate: target version " + std::to_string(target) +
                                                " is outside 0.." + std::to_string(latest_schema_version()) +
                                                ", the schema versions this library knows");
    std::string doing = "taking the schema migration lock";  // owned: the catch below outlives each step's text
    try {
        const migration_lock lock(conninfo, options.lock_wait);
        std::unique_ptr<soci::session> session = detail::connect(conninfo);
        doing = "creating or reading seqinbox_schema_history";
        *session << create_history;
        const auto history = read_history(*session);
        check_history(history, conninfo);

        migrate_report report;
        for (const auto& [version, script] : history) report.already_applied.push_back(version);
        report.schema_version = history.empty() ? 0 : history.rbegin()->first;
        for (const auto& script : schema_scripts()) {
            if (script.version > target || history.contains(script.version)) continue;
            doing = "applying schema script V" + std::to_string(script.version) + "__" + std::string(script.name) + ".sql";
            apply(*session, script);
            report.applied.push_back(script.version);
            report.schema_version = std::max(report.schema_version, script.version);
        }
        return report;
    } catch (const soci::soci_error& e) {
        detail::rethrow(e, doing, conninfo);
    }
}

}  // namespace seqinbox::postgresql
