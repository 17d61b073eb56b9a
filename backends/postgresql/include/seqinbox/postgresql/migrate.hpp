#pragma once
// Schema migrations of the PostgreSQL backend. The scripts of schema/postgresql/ (V<n>__<name>.sql) are
// compiled into the library, so migrating needs no file at run time.
//
// migrate() applies the missing scripts in version order, each in its own transaction together
// with its row in seqinbox_schema_history (version, name, SHA-256 of the script). It holds an
// advisory lock while it works (in a transaction left open on a second connection, so that it
// works through PgBouncer in transaction mode too; nothing it sends is a named prepared
// statement), so service instances starting together apply each script exactly once; the others wait, then find nothing left to do. A script whose first line
// is "-- seqinbox: each statement on its own, outside a transaction" (V7: CREATE INDEX
// CONCURRENTLY, so that writers go on meanwhile) runs statement by statement, then records its
// row; it is written to be run again after stopping halfway.
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqinbox::postgresql {

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
    /// How long to wait for another instance's migration (advisory lock) before giving up with a
    /// retryable error.
    std::chrono::milliseconds lock_wait{std::chrono::seconds(60)};
};

struct migrate_report {
    std::vector<int> applied;          ///< versions applied by this call, ascending
    std::vector<int> already_applied;  ///< versions found in the history table, ascending
    int schema_version = 0;            ///< the database's version afterwards (0: empty)
};

/// Brings the database named by `conninfo` (libpq key=value or URI form) to
/// options.target_version. Idempotent and safe to call concurrently.
///
/// Throws seqinbox::error with category
///   - connection: the database cannot be reached or the connection dropped;
///   - schema_mismatch: the database has a version newer than this library, or a recorded
///     script's checksum differs from the embedded one (nothing is applied then);
///   - misuse: target_version outside 0..latest_schema_version();
///   - retryable: the advisory lock was not obtained within lock_wait;
///   - internal: a script failed (its transaction is rolled back, or for a script outside a
///     transaction the next run repeats it; the SQLSTATE is attached).
migrate_report migrate(const std::string& conninfo, const migrate_options& options = {});

/// `conninfo` for messages and logs: its options in key=value form, every secret libpq knows
/// (password, sslpassword, any it marks secret) shown as ***. One that does not parse, or a URI
/// with an '@' libpq does not take as the end of the user info, is withheld whole.
std::string redact_conninfo(std::string_view conninfo);

}  // namespace seqinbox::postgresql
