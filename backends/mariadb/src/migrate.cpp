// seqinbox::mariadb::migrate: see migrate.hpp.
#include "seqinbox/mariadb/migrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <soci/soci.h>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::mariadb {

namespace {

constexpr std::string_view create_history =
    "CREATE TABLE IF NOT EXISTS seqinbox_schema_history ("
    " version INT NOT NULL PRIMARY KEY,"
    " name VARCHAR(255) NOT NULL,"
    " checksum CHAR(64) NOT NULL,"  // lowercase hex SHA-256 of the script
    " applied_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)) ENGINE = InnoDB";

/// Migrations wait on the server's lock wait timeout only while they run DDL.
constexpr std::chrono::seconds migration_lock_wait{50};

struct applied_script {
    std::string name;
    std::string checksum;
};

/// Holds the named lock seqinbox_migration on a session of its own: it ends with the session, on
/// release or when the migrator dies.
class migration_lock {
public:
    migration_lock(const std::string& url, std::chrono::milliseconds wait) : session_(detail::connect(url, migration_lock_wait)) {
        const auto seconds = static_cast<long long>(std::ceil(static_cast<double>(wait.count()) / 1000.0));
        soci::indicator got_null = soci::i_ok;
        int got = 0;
        *session_ << "SELECT GET_LOCK('seqinbox_migration', " + std::to_string(seconds) + ")", soci::into(got, got_null);
        if (got_null != soci::i_ok || got != 1)
            throw error(error_category::retryable,
                        "taking the schema migration lock on '" + redact_url(url) + "': another migration held it for " +
                            std::to_string(wait.count()) + " ms; retry");
    }

private:
    std::unique_ptr<soci::session> session_;
};

std::map<int, applied_script> read_history(soci::session& session) {
    std::map<int, applied_script> history;
    soci::rowset<soci::row> rows = (session.prepare << "SELECT version, name, checksum FROM seqinbox_schema_history");
    for (const auto& row : rows)
        history.emplace(static_cast<int>(detail::number_at(row, 0)), applied_script{detail::text_at(row, 1), detail::text_at(row, 2)});
    return history;
}

/// Refuses a database this library must not touch: newer than the library, or with an applied
/// script that differs from the embedded one.
void check_history(const std::map<int, applied_script>& history, const std::string& url) {
    const auto where = " (database '" + redact_url(url) + "')";
    if (!history.empty() && history.rbegin()->first > latest_schema_version())
        throw error(error_category::schema_mismatch,
                    "the database schema is at version " + std::to_string(history.rbegin()->first) +
                        ", newer than this seqinbox library (MariaDB schema version " + std::to_string(latest_schema_version()) + ")" +
                        where + "; upgrade seqinbox to the version that migrated this database, or use another database");
    for (const auto& script : schema_scripts()) {
        auto it = history.find(script.version);
        if (it == history.end() || it->second.checksum == script.sha256) continue;
        throw error(error_category::schema_mismatch,
                    "schema script mariadb/V" + std::to_string(script.version) + "__" + std::string(script.name) +
                        ".sql applied to the database differs from the one in this library (recorded SHA-256 " + it->second.checksum +
                        ", library " + std::string(script.sha256) + ")" + where +
                        "; released schema scripts must never change: restore the original script and add a new version for the change");
    }
}

/// The statements of `sql`: each ends with ';' at the end of a line (comment lines are dropped).
std::vector<std::string> statements_of(std::string_view sql) {
    std::vector<std::string> statements;
    std::string current;
    for (std::size_t at = 0; at < sql.size();) {
        const std::size_t end = std::min(sql.find('\n', at), sql.size());
        const std::string_view line = sql.substr(at, end - at);
        at = end + 1;
        const auto text = line.find_first_not_of(' ');
        if (text == std::string_view::npos || line.substr(text).starts_with("--")) continue;
        current.append(line).push_back('\n');
        if (line.ends_with(';')) statements.push_back(std::exchange(current, {}));
    }
    if (current.find_first_not_of(" \n") != std::string::npos) statements.push_back(current);
    return statements;
}

void apply(soci::session& session, const schema_script& script) {
    for (const auto& statement : statements_of(script.sql)) session << statement;
    session << "INSERT INTO seqinbox_schema_history (version, name, checksum) VALUES (" + std::to_string(script.version) + ", " +
                   detail::bytes_literal(script.name) + ", " + detail::bytes_literal(script.sha256) + ")";
}

}  // namespace

migrate_report migrate(const std::string& url, const migrate_options& options) {
    const int target = options.target_version.value_or(latest_schema_version());
    if (target < 0 || target > latest_schema_version())
        throw error(error_category::misuse, "migrate: target version " + std::to_string(target) + " is outside 0.." +
                                                std::to_string(latest_schema_version()) + ", the MariaDB schema versions this library knows");
    std::string doing = "taking the schema migration lock";  // owned: the catch outlives the try's locals
    try {
        const migration_lock lock(url, options.lock_wait);
        std::unique_ptr<soci::session> session = detail::connect(url, migration_lock_wait);
        doing = "reading seqinbox_schema_history";
        *session << create_history;
        const auto history = read_history(*session);
        check_history(history, url);

        migrate_report report;
        for (const auto& [version, script] : history) report.already_applied.push_back(version);
        report.schema_version = history.empty() ? 0 : history.rbegin()->first;
        for (const auto& script : schema_scripts()) {
            if (script.version > target || history.contains(script.version)) continue;
            doing = "applying schema script mariadb/V" + std::to_string(script.version) + "__" + std::string(script.name) + ".sql";
            apply(*session, script);
            report.applied.push_back(script.version);
            report.schema_version = std::max(report.schema_version, script.version);
        }
        return report;
    } catch (const soci::soci_error& e) {
        detail::rethrow(e, doing, url);
    }
}

}  // namespace seqinbox::mariadb
