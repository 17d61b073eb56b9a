#include "connection.hpp"

#include <algorithm>
#include <cctype>

#include <soci/postgresql/soci-postgresql.h>

#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"

namespace seqinbox::postgresql {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

}  // namespace

// Hand-written rather than std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized under ASan.
std::string redact_conninfo(std::string_view conninfo) {
    std::string text(conninfo);
    // URI userinfo: postgresql://user:secret@host
    for (std::string_view scheme : {"postgresql://", "postgres://"}) {
        if (!text.starts_with(scheme)) continue;
        const auto authority_end = text.find_first_of("/?", scheme.size());
        const auto at = text.rfind('@', authority_end);
        const auto colon = text.find(':', scheme.size());
        if (at != std::string::npos && at >= scheme.size() && colon < at) text.replace(colon + 1, at - colon - 1, "***");
        break;
    }
    // password=value in key=value form (value quoted or not) and as a URI query parameter
    constexpr std::string_view keyword = "password";
    for (std::size_t i = 0; i + keyword.size() <= text.size(); ++i) {
        const bool word_start = i == 0 || std::isspace(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '?' ||
                                text[i - 1] == '&';
        if (!word_start || !iequals(std::string_view(text).substr(i, keyword.size()), keyword)) continue;
        std::size_t j = i + keyword.size();
        while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        if (j == text.size() || text[j] != '=') continue;
        ++j;
        while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        std::size_t end = j;
        if (end < text.size() && text[end] == '\'') {
            for (++end; end < text.size() && text[end] != '\''; ++end)
                if (text[end] == '\\') ++end;  // an escaped character
            end = std::min(end + 1, text.size());
        } else {
            while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) && text[end] != '&') ++end;
        }
        text.replace(j, end - j, "***");
        i = j + 2;
    }
    return text;
}

namespace detail {

namespace {

constexpr std::string_view connection_fix =
    "check the connection string (host, port, dbname, user, password) and that the PostgreSQL server "
    "is running and accepts connections from this host";

bool starts_with_any(const std::string& s, std::initializer_list<std::string_view> prefixes) {
    for (auto p : prefixes)
        if (s.starts_with(p)) return true;
    return false;
}

}  // namespace

/// `conninfo` in key=value form: SOCI mangles URIs ("postgresql://..." loses its database).
std::string key_value_form(const std::string& conninfo) {
    char* problem = nullptr;
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &problem);
    if (options == nullptr) {
        const std::string why = problem != nullptr ? problem : "cannot be parsed";
        PQfreemem(problem);
        throw error(error_category::connection, "invalid PostgreSQL connection string '" + redact_conninfo(conninfo) +
                                                    "': " + why + "; " + std::string(connection_fix));
    }
    std::string text;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val == nullptr) continue;
        if (std::string_view(o->val).find_first_of(" \t\n\r\f\v") != std::string_view::npos) {
            const std::string keyword = o->keyword;
            PQconninfoFree(options);
            throw error(error_category::configuration,
                        "the connection parameter '" + keyword + "' of '" + redact_conninfo(conninfo) +
                            "' contains whitespace, which SOCI 4.0 cannot pass to libpq; set it through the "
                            "environment (PG* variables) or a service file (PGSERVICE) instead");
        }
        if (!text.empty()) text += ' ';  // SOCI rejects a trailing space ("invalid connection option")
        text += std::string(o->keyword) + "='";
        for (const char* c = o->val; *c != '\0'; ++c) {
            if (*c == '\'' || *c == '\\') text += '\\';
            text += *c;
        }
        text += '\'';
    }
    PQconninfoFree(options);
    return text;
}

std::unique_ptr<soci::session> connect(const std::string& conninfo) {
    std::unique_ptr<soci::session> session;
    try {
        session = std::make_unique<soci::session>(soci::postgresql, key_value_form(conninfo));
    } catch (const soci::soci_error& e) {
        throw error(error_category::connection, "cannot connect to PostgreSQL with '" + redact_conninfo(conninfo) +
                                                    "': " + e.get_error_message() + "; " + std::string(connection_fix));
    }
    try {
        *session << "SET TIME ZONE 'UTC'";
        *session << "SET client_min_messages = warning";  // libpq would print NOTICEs on stderr
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
    if (lost)
        throw error(error_category::connection,
                    where + ": the connection to PostgreSQL was lost (" + e.get_error_message() + "); " +
                        std::string(connection_fix),
                    sqlstate);
    if (starts_with_any(sqlstate, {"55P03", "40001", "40P01", "57014"}))
        throw error(error_category::retryable, where + ": " + e.get_error_message() + " (SQLSTATE " + sqlstate + "); retry",
                    sqlstate);
    throw error(error_category::internal,
                where + ": " + e.get_error_message() + (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")"), sqlstate);
}

}  // namespace detail

}  // namespace seqinbox::postgresql
