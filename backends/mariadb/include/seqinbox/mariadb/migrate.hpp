#pragma once
// Schema migrations of the MariaDB store. The scripts of schema/mariadb/ (V<n>__<name>.sql) are
// compiled into the library, so migrating needs no file at run time.
//
// migrate() applies the missing scripts in version order, then records each in
// seqinbox_schema_history (version, name, SHA-256 of the script). MariaDB commits every DDL
// statement on its own, so a script is not one transaction: its statements run one by one and are
// written to be run again after a stop halfway (CREATE ... IF NOT EXISTS). It holds a named lock
// (GET_LOCK('seqinbox_migration'), on a session of its own, released with that session) while it
// works, so service instances starting together apply each script exactly once; the others wait,
// then find nothing left to do.
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqinbox::mariadb {

/// One embedded schema script.
struct schema_script {
    int version;              ///< n of V<n>__<name>.sql; versions are 1, 2, ... without gaps
    std::string_view name;    ///< <name>
    std::string_view sql;     ///< the script text, byte for byte
    std::string_view sha256;  ///< lowercase hex SHA-256 of sql, as recorded in the history table
};

/// The embedded scripts in version order.
std::span<const schema_script> schema_scripts() noexcept;

/// The schema version this library works with (the last script's version).
int latest_schema_version() noexcept;

struct migrate_options {
    /// Stop after this version (default: the latest). A database already past it is left as is.
    std::optional<int> target_version{};
    /// How long to wait for another instance's migration (the named lock) before giving up with
    /// a retryable error. Whole seconds (GET_LOCK's unit), rounded up.
    std::chrono::milliseconds lock_wait{std::chrono::seconds(60)};
};

struct migrate_report {
    std::vector<int> applied;          ///< versions applied by this call, ascending
    std::vector<int> already_applied;  ///< versions found in the history table, ascending
    int schema_version = 0;            ///< the database's version afterwards (0: empty)
};

/// Brings the database named by `url` (mariadb://user:password@host:port/database) to
/// options.target_version. Idempotent and safe to call concurrently.
///
/// Throws seqinbox::error with category
///   - configuration: `url` does not parse (the message names it with its password redacted);
///   - connection: the database cannot be reached or the connection dropped;
///   - schema_mismatch: the database has a version newer than this library, or a recorded
///     script's checksum differs from the embedded one (nothing is applied then);
///   - misuse: target_version outside 0..latest_schema_version();
///   - retryable: the migration lock was not obtained within lock_wait;
///   - internal: a statement of a script failed (the next run repeats the script).
migrate_report migrate(const std::string& url, const migrate_options& options = {});

/// `url` for messages and logs: its password shown as ***. One that does not parse is withheld
/// whole (any part of it may be a password).
std::string redact_url(std::string_view url);

}  // namespace seqinbox::mariadb
