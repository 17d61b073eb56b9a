#pragma once
// Private to seqinbox::mariadb: the connection string, opening SOCI sessions with the settings
// every session carries, and turning SOCI errors into seqinbox::error, so that no SOCI type
// reaches a public header or a caller.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <soci/soci.h>

namespace seqinbox::mariadb::detail {

/// mariadb://user:password@host:port/database, its parts percent-decoded.
struct url_parts {
    std::string user;
    std::string password;
    std::string host;
    unsigned port = 3306;
    std::string database;
};

/// The parts of `url`, or nullopt when it does not parse.
std::optional<url_parts> parse_url(std::string_view url);

/// A session on `url` (charset utf8mb4), set up as every store session is: READ COMMITTED, time
/// zone UTC, strict sql_mode, innodb_lock_wait_timeout `lock_wait`. Throws seqinbox::error
/// (configuration: the url does not parse; connection: the server cannot be reached), naming
/// the redacted url.
std::unique_ptr<soci::session> connect(const std::string& url, std::chrono::seconds lock_wait);

/// Makes the session log rows where the server logs statements, or throws a configuration error.
void log_rows_not_statements(soci::session& session, const std::string& url);

/// The server's error number of a SOCI error (0 for an error SOCI raised itself).
unsigned error_number(const soci::soci_error& e);

/// Whether `e` means the connection is gone (client errors 2006, 2013 and kin, 1927 killed).
bool lost_connection(const soci::soci_error& e);

/// Whether `e` is the server refusing writes (1290 with --read-only, 1836): a primary demoted
/// since the session was opened, or a replica.
bool refuses_writes(const soci::soci_error& e);

/// Whether the store drops the session after `e` (lost, or refusing writes: a new session may
/// reach the primary of now through a proxy or a virtual IP).
bool ends_session(const soci::soci_error& e);

/// Whether after `e` the server has rolled the whole transaction back (deadlock 1213; lock
/// wait timeout 1205 rolls back the statement alone, and the store rolls back the rest).
bool ends_transaction(const soci::soci_error& e);

/// Rethrows a SOCI error as seqinbox::error: connection (lost connections, writes refused), retryable (1213
/// deadlock, 1205 lock wait timeout, 1317 statement interrupted, and 1452 foreign key failure:
/// an instance removed meanwhile, with SQLSTATE 23503), bad_message (1153: a statement larger
/// than a query may be, SQLSTATE 54000), otherwise internal; with a SQLSTATE.
/// `doing` says what failed ("claiming ...").
[[noreturn]] void rethrow(const soci::soci_error& e, std::string_view doing, std::string_view url);

}  // namespace seqinbox::mariadb::detail
