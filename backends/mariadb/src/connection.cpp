#include "connection.hpp"

#include <errmsg.h>
#include <mysqld_error.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include <soci/mysql/soci-mysql.h>

#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/migrate.hpp"

namespace seqinbox::mariadb {

namespace {

constexpr std::string_view scheme = "mariadb://";

constexpr std::string_view url_syntax_hint =
    "write it as mariadb://user:password@host:port/database, percent-encoding '@', '/', ':' and '%' in the user "
    "name, password and database name (%40, %2F, %3A, %25)";

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

std::optional<std::string> percent_decoded(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        if (i + 2 >= text.size()) return std::nullopt;
        const int high = hex_digit(text[i + 1]), low = hex_digit(text[i + 2]);
        if (high < 0 || low < 0) return std::nullopt;
        out += static_cast<char>(high * 16 + low);
        i += 2;
    }
    return out;
}

/// A value of SOCI's MySQL connection string: quoted, with \ before ' and \.
std::string soci_value(const std::string& value) {
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

}  // namespace

std::string redact_url(std::string_view url) {
    if (!detail::parse_url(url)) return "(connection string withheld: it does not parse, so any part of it may be a password)";
    const auto rest = url.substr(scheme.size());
    const auto at = rest.find('@');
    if (at == std::string_view::npos || at > rest.find('/')) return std::string(url);
    const auto user_info = rest.substr(0, at);
    const auto colon = user_info.find(':');
    if (colon == std::string_view::npos) return std::string(url);
    return std::string(scheme) + std::string(user_info.substr(0, colon)) + ":***" + std::string(rest.substr(at));
}

namespace detail {

// A '@' or '/' inside the user info must be percent-encoded: the user info ends at the first '@',
// the host at the first '/' after it, so that no reading is ambiguous.
std::optional<url_parts> parse_url(std::string_view url) {
    if (!url.starts_with(scheme)) return std::nullopt;
    std::string_view rest = url.substr(scheme.size());
    url_parts parts;
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    std::string_view authority = rest.substr(0, slash);
    const std::string_view database = rest.substr(slash + 1);
    if (database.empty() || database.find_first_of("/?#@") != std::string_view::npos) return std::nullopt;
    if (const auto at = authority.find('@'); at != std::string_view::npos) {
        const std::string_view user_info = authority.substr(0, at);
        authority = authority.substr(at + 1);
        const auto colon = user_info.find(':');
        auto user = percent_decoded(user_info.substr(0, colon));
        if (!user || user->empty()) return std::nullopt;
        parts.user = *user;
        if (colon != std::string_view::npos) {
            auto password = percent_decoded(user_info.substr(colon + 1));
            if (!password) return std::nullopt;
            parts.password = *password;
        }
    }
    if (authority.find('@') != std::string_view::npos) return std::nullopt;
    const auto colon = authority.rfind(':');
    parts.host = std::string(authority.substr(0, colon));
    if (parts.host.empty()) return std::nullopt;
    if (colon != std::string_view::npos) {
        const std::string_view port = authority.substr(colon + 1);
        if (port.empty() || port.size() > 5) return std::nullopt;
        unsigned value = 0;
        for (char c : port) {
            if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
            value = value * 10 + static_cast<unsigned>(c - '0');
        }
        if (value == 0 || value > 65535) return std::nullopt;
        parts.port = value;
    }
    auto name = percent_decoded(database);
    if (!name) return std::nullopt;
    parts.database = *name;
    return parts;
}

std::unique_ptr<soci::session> connect(const std::string& url, std::chrono::seconds lock_wait) {
    const auto parts = parse_url(url);
    if (!parts)
        throw error(error_category::configuration,
                    "the MariaDB connection string '" + redact_url(url) + "' does not parse: " + std::string(url_syntax_hint));
    std::string text = "host=" + soci_value(parts->host) + " port=" + std::to_string(parts->port) + " db=" + soci_value(parts->database) +
                       " charset=utf8mb4";
    if (!parts->user.empty()) text += " user=" + soci_value(parts->user);
    if (!parts->password.empty()) text += " password=" + soci_value(parts->password);
    std::unique_ptr<soci::session> session;
    try {
        session = std::make_unique<soci::session>(soci::mysql, text);
    } catch (const soci::soci_error& e) {
        throw error(error_category::connection,
                    "connecting to MariaDB at '" + redact_url(url) + "': " + e.get_error_message() +
                        "; check that the server runs and accepts connections there, and the user name, password and database",
                    "08001");
    }
    try {
        // Integers formatted here, never user text. autocommit: a server may start sessions
        // without it, and what the store does outside a transaction would then stay uncommitted.
        *session << "SET SESSION autocommit = 1, tx_isolation = 'READ-COMMITTED', time_zone = '+00:00',"
                    " sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION',"
                    " innodb_lock_wait_timeout = " +
                        std::to_string(std::max<long long>(1, lock_wait.count()));
    } catch (const soci::soci_error& e) {
        rethrow(e, "configuring the session", url);
    }
    log_rows_not_statements(*session, url);
    return session;
}

// InnoDB cannot log statements at READ COMMITTED: with binlog_format = STATEMENT every write fails
// (1665). MIXED (MariaDB's default) logs such writes as rows; a session may choose it when its user
// holds BINLOG ADMIN, else the server's setting must change.
void log_rows_not_statements(soci::session& session, const std::string& url) {
    int statements = 0;
    try {
        session << "SELECT @@log_bin = 1 AND @@binlog_format = 'STATEMENT'", soci::into(statements);
        if (statements == 0) return;
        session << "SET SESSION binlog_format = 'MIXED'";
    } catch (const soci::soci_error& e) {
        if (statements == 0) rethrow(e, "reading the server's binary log format", url);
        throw error(error_category::configuration,
                    "MariaDB at '" + redact_url(url) +
                        "' logs statements (binlog_format = STATEMENT), which InnoDB cannot do at READ COMMITTED, the isolation the "
                        "store needs: every write would fail (error 1665). Set binlog_format = MIXED (the default) or ROW on the "
                        "server, or grant the store's user BINLOG ADMIN so that its sessions log MIXED (" +
                        e.get_error_message() + ")");
    }
}

unsigned error_number(const soci::soci_error& e) {
    if (const auto* my = dynamic_cast<const soci::mysql_soci_error*>(&e)) return my->err_num_;
    return 0;
}

bool lost_connection(const soci::soci_error& e) {
    if (e.get_error_category() == soci::soci_error::connection_error) return true;
    const unsigned n = error_number(e);
    for (unsigned lost : {unsigned{CR_SERVER_GONE_ERROR}, unsigned{CR_SERVER_LOST}, unsigned{CR_CONNECTION_ERROR},
                          unsigned{CR_CONN_HOST_ERROR}, unsigned{CR_COMMANDS_OUT_OF_SYNC}, unsigned{ER_CONNECTION_KILLED},
                          unsigned{ER_SERVER_SHUTDOWN}, unsigned{CR_SERVER_LOST_EXTENDED}})
        if (n == lost) return true;
    return false;
}

bool refuses_writes(const soci::soci_error& e) {
    const unsigned n = error_number(e);
    return n == ER_READ_ONLY_MODE || (n == ER_OPTION_PREVENTS_STATEMENT && e.get_error_message().find("read-only") != std::string::npos);
}

bool ends_session(const soci::soci_error& e) { return lost_connection(e) || refuses_writes(e); }

bool ends_transaction(const soci::soci_error& e) { return error_number(e) == ER_LOCK_DEADLOCK; }

void rethrow(const soci::soci_error& e, std::string_view doing, std::string_view url) {
    const unsigned n = error_number(e);
    const std::string where = std::string(doing) + " on '" + redact_url(url) + "'";
    const std::string what = e.get_error_message() + (n != 0 ? " (error " + std::to_string(n) + ")" : "");
    if (lost_connection(e))
        throw error(error_category::connection,
                    where + ": the connection to MariaDB was lost (" + what +
                        "); the delivery was not acknowledged and is retried on a new connection",
                    "08S01");
    if (refuses_writes(e))
        throw error(error_category::connection,
                    where + ": the server refuses writes (" + what +
                        "): it is read-only, a demoted primary or a replica; the delivery was not acknowledged and is retried on a "
                        "new connection (point the URL at the primary, e.g. through a proxy or a virtual IP that follows failovers)",
                    "25006");
    switch (n) {
    case ER_NO_REFERENCED_ROW_2:
    case ER_NO_REFERENCED_ROW:
        throw error(error_category::retryable, where + ": the sequence instance no longer exists (" + what + "); retry", "23503");
    case ER_LOCK_DEADLOCK: throw error(error_category::retryable, where + ": " + what + "; retry", "40001");
    case ER_LOCK_WAIT_TIMEOUT:
        throw error(error_category::retryable, where + ": " + what + " (store_options::lock_wait_timeout); retry", "HY000");
    case ER_QUERY_INTERRUPTED: throw error(error_category::retryable, where + ": " + what + "; retry", "70100");
    case ER_CON_COUNT_ERROR: throw error(error_category::retryable, where + ": " + what + "; retry", "08004");
    case ER_NET_PACKET_TOO_LARGE:  // the store's own check (pool.cpp) or the server's: no query can carry it, ever
        throw error(error_category::bad_message, where + ": " + what + "; not retryable: delivered again, it fails again", "54000");
    case ER_NO_SUCH_TABLE:
    case ER_BAD_FIELD_ERROR:
        throw error(error_category::schema_mismatch, where + ": " + what + "; run `seqinbox migrate` on this database", "42S02");
    default: break;
    }
    throw error(error_category::internal, where + ": " + what, "HY000");
}

}  // namespace detail

}  // namespace seqinbox::mariadb
