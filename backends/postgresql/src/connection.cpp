#include "connection.hpp"

#include <memory>

#include <soci/postgresql/soci-postgresql.h>

#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"

namespace seqinbox::postgresql {

namespace {

constexpr std::string_view withheld =
    "(connection string withheld: it does not parse unambiguously, so any part of it may be a password)";

constexpr std::string_view conninfo_syntax_hint =
    "write it as key=value pairs, quoting values that contain spaces as '...' (with \\' and \\\\ inside), "
    "or as a URI, and percent-encode '@', '/', '?', ':' and '%' in its user name, password and values "
    "(%40, %2F, %3F, %3A, %25)";

using parsed_options = std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)>;

/// Whether `conninfo` is a URI with a raw '@' after the one libpq ends the user info at (the first
/// '@' before any '/'): its author meant it inside the password, whose rest libpq then reads as
/// host, port, database name or query and quotes in its errors.
bool has_stray_at_sign(std::string_view conninfo) {
    for (std::string_view scheme : {"postgresql://", "postgres://"}) {
        if (!conninfo.starts_with(scheme)) continue;
        const auto rest = conninfo.substr(scheme.size());
        const auto at = rest.find('@');
        const auto user_info_end = at < rest.find('/') ? at + 1 : 0;
        return rest.find('@', user_info_end) != std::string_view::npos;
    }
    return false;
}

/// The options of `conninfo`, or null when libpq cannot parse it or reads it other than meant.
/// libpq's complaint is dropped unread: it may quote part of a password.
parsed_options parse_unambiguously(const std::string& conninfo) {
    char* complaint = nullptr;
    parsed_options options(PQconninfoParse(conninfo.c_str(), &complaint), &PQconninfoFree);
    PQfreemem(complaint);
    if (has_stray_at_sign(conninfo)) options.reset();
    return options;
}

/// libpq marks the options it never displays (password, sslpassword, and any it adds) with '*'.
bool is_secret(const PQconninfoOption& option) { return option.dispchar != nullptr && option.dispchar[0] == '*'; }

/// `options` in key=value form. For libpq every value is quoted; for messages a secret shows as
/// *** and a value is quoted only when it has to be.
std::string rendered(const PQconninfoOption* options, bool for_messages) {
    std::string text;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val == nullptr) continue;
        const std::string_view value = for_messages && is_secret(*o) ? std::string_view("***") : std::string_view(o->val);
        const bool quoted = !for_messages || value.empty() || value.find_first_of(" \t\n\r\f\v'\\") != std::string_view::npos;
        if (!text.empty()) text += ' ';  // SOCI rejects a trailing space ("invalid connection option")
        text += std::string(o->keyword) + (quoted ? "='" : "=");
        for (const char c : value) {
            if (c == '\'' || c == '\\') text += '\\';
            text += c;
        }
        if (quoted) text += '\'';
    }
    return text;
}

}  // namespace

std::string redact_conninfo(std::string_view conninfo) {
    const auto options = parse_unambiguously(std::string(conninfo));
    return options ? rendered(options.get(), true) : std::string(withheld);
}

namespace detail {

namespace {

constexpr std::string_view connection_fix =
    "check the connection string (host, port, dbname, user, password) and that the PostgreSQL server "
    "is running and accepts connections from this host";

void ignore_notice(void*, const char*) {}

bool starts_with_any(const std::string& s, std::initializer_list<std::string_view> prefixes) {
    for (auto p : prefixes)
        if (s.starts_with(p)) return true;
    return false;
}

}  // namespace

/// `conninfo` in key=value form: SOCI mangles URIs ("postgresql://..." loses its database).
std::string key_value_form(const std::string& conninfo) {
    const auto options = parse_unambiguously(conninfo);
    if (!options)
        throw error(error_category::connection,
                    "the PostgreSQL connection string does not parse unambiguously (details withheld: they may contain a "
                    "password); " + std::string(conninfo_syntax_hint));
    for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o)
        if (o->val != nullptr && std::string_view(o->val).find_first_of(" \t\n\r\f\v") != std::string_view::npos)
            throw error(error_category::configuration,
                        "the connection parameter '" + std::string(o->keyword) + "' of '" + redact_conninfo(conninfo) +
                            "' contains whitespace, which SOCI 4.0 cannot pass to libpq; set it through the "
                            "environment (PG* variables) or a service file (PGSERVICE) instead");
    return rendered(options.get(), false);
}

std::unique_ptr<soci::session> connect(const std::string& conninfo) {
    std::unique_ptr<soci::session> session;
    try {
        session = std::make_unique<soci::session>(soci::postgresql, key_value_form(conninfo));
    } catch (const soci::soci_error& e) {
        throw error(error_category::connection, "cannot connect to PostgreSQL with '" + redact_conninfo(conninfo) +
                                                    "': " + e.get_error_message() + "; " + std::string(connection_fix));
    }
    // libpq would print NOTICEs on stderr. Ignored here rather than by SET client_min_messages:
    // PgBouncer in transaction mode carries a session's TimeZone to each server connection it
    // lends, but no other setting.
    PQsetNoticeProcessor(static_cast<soci::postgresql_session_backend*>(session->get_backend())->conn_, ignore_notice, nullptr);
    try {
        *session << "SET TIME ZONE 'UTC'";
    } catch (const soci::soci_error& e) {
        rethrow(e, "configuring the session", conninfo);
    }
    return session;
}

void rethrow(const soci::soci_error& e, std::string_view doing, std::string_view conninfo) {
    std::string sqlstate;
    bool lost = e.get_error_category() == soci::soci_error::connection_error;
    if (const auto* pg = dynamic_cast<const soci::postgresql_soci_error*>(&e)) sqlstate = pg->sqlstate();
    lost = lost || sqlstate.starts_with("08") || starts_with_any(sqlstate, {"57P01", "57P02", "57P03"});
    const std::string where = std::string(doing) + " on '" + redact_conninfo(conninfo) + "'";
    // A standby, or a primary demoted since the connection was opened: another connection
    // (target_session_attrs=read-write) finds the primary of now.
    if (sqlstate == "25006")
        throw error(error_category::connection,
                    where + ": the server refuses writes (" + e.get_error_message() +
                        "): it is read-only, a standby perhaps; list every server of the cluster in the connection string with "
                        "target_session_attrs=read-write",
                    sqlstate);
    // The store's own prepared statements, missing or made already on the server connection it
    // talks to: a pooler lends this client another client's connection. The session is dropped
    // (its knowledge of what is prepared is wrong) and the delivery not acknowledged.
    if (sqlstate == "26000" || sqlstate == "42P05")
        throw error(error_category::connection,
                    where + ": " + e.get_error_message() + " (SQLSTATE " + sqlstate +
                        "): the server connection does not hold the statements this client prepared on it; is a pooler "
                        "in transaction mode (PgBouncer) between the store and PostgreSQL? Then set "
                        "store_options::through = pooler::transaction (--pooler transaction)",
                    sqlstate);
    if (lost)
        throw error(error_category::connection,
                    where + ": the connection to PostgreSQL was lost (" + e.get_error_message() + "); " +
                        std::string(connection_fix),
                    sqlstate);
    // Lock waits, conflicts, cancellations, and a full lock table or too many connections: the
    // same statement may succeed later.
    if (starts_with_any(sqlstate, {"55P03", "40001", "40P01", "57014", "53200", "53300"}))
        throw error(error_category::retryable, where + ": " + e.get_error_message() + " (SQLSTATE " + sqlstate + "); retry",
                    sqlstate);
    throw error(error_category::internal,
                where + ": " + e.get_error_message() + (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")"), sqlstate);
}

}  // namespace detail

}  // namespace seqinbox::postgresql
