#pragma once
// The database a subcommand opens: `--postgres CONNINFO` (its historical name) or `--database URL`,
// one flag under two names. Its value says the store: `mariadb://user:password@host:port/db` opens
// the MariaDB store (seqinbox/mariadb/store.hpp), anything else is a libpq connection string.
#include <string>
#include <string_view>

#include "options.hpp"

namespace seqinbox::cli {

// A macro so that each command's usage text, one string literal, can include it.
#define SEQINBOX_DATABASE_FLAG_HELP                                                                                  \
    "  --postgres CONNINFO       the inbox database, migrated with `seqinbox migrate`: a libpq connection string\n" \
    "  --database URL            (e.g. 'host=db dbname=app user=inbox', postgresql://inbox@db/app) or a MariaDB\n" \
    "                            URL mariadb://user:password@host:port/database (the two flags are one)\n"

/// Reads `--postgres` or `--database` into `conninfo` when it is the current argument.
inline bool read_database_flag(option_reader& r, std::string& conninfo) {
    auto v = r.value("--postgres");
    if (!v) v = r.value("--database");
    if (!v) return false;
    conninfo = std::string(*v);
    return true;
}

/// Whether `conninfo` names a MariaDB database rather than a PostgreSQL one.
inline bool names_mariadb(std::string_view conninfo) { return conninfo.starts_with("mariadb://"); }

}  // namespace seqinbox::cli
