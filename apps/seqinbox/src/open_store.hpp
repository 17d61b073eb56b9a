#pragma once
// The store a `--postgres`/`--database` value names (database_flag.hpp), opened for a subcommand:
// the MariaDB store for a mariadb:// URL, the PostgreSQL store otherwise. The subcommand's work is
// a generic lambda, run on whichever it is.
#include <cstddef>
#include <string>

#include "database_flag.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/pooler.hpp"
#include "seqinbox/postgresql/store.hpp"
#ifdef SEQINBOX_CLI_HAS_MARIADB
#include "seqinbox/mariadb/store.hpp"
#endif

namespace seqinbox::cli {

/// Opens the store of `conninfo` with `pool_size` connections and returns `body(store)`. Throws
/// seqinbox::error(configuration) for `--pooler` with a MariaDB URL (PgBouncer is PostgreSQL's) and
/// for a MariaDB URL in a build without that store; the stores' own errors otherwise.
template <class Body>
int on_store(const std::string& conninfo, postgresql::pooler through, std::size_t pool_size, Body&& body) {
    if (names_mariadb(conninfo)) {
        if (through != postgresql::pooler::none)
            throw error(error_category::configuration, "--pooler is for PostgreSQL (PgBouncer); a MariaDB URL takes none");
#ifdef SEQINBOX_CLI_HAS_MARIADB
        mariadb::store store({.url = conninfo, .pool_size = pool_size});
        return body(store);
#else
        throw error(error_category::configuration, "a mariadb:// connection string needs the MariaDB store, which this build lacks");
#endif
    }
    postgresql::store store({.conninfo = conninfo, .pool_size = pool_size, .through = through});
    return body(store);
}

}  // namespace seqinbox::cli
