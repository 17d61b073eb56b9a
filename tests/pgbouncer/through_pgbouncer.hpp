#pragma once
// The route (tests/postgresql/store_route.hpp) through a throwaway PgBouncer in transaction mode
// with `ServerConnections` server connections per database, one per test program, in front of
// pg_server::shared(): the store connects to PgBouncer and runs in pooler::transaction mode.
//
// The store's pool (the clients) is larger than PgBouncer's server pool, so clients queue for
// server connections. The server pool must still exceed the claim transactions that can be open
// at once (one per consumer thread): a delivery holds its claim transaction while it writes its
// state step beside it, which needs a second server connection; were every server connection
// held by claim transactions (the holder's and those waiting for its claim), it would wait for
// ever (lock_timeout 0).
#include <cstddef>
#include <string>

#include "pgbouncer_server.hpp"
#include "seqinbox/postgresql/pooler.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::test {

template <std::size_t ServerConnections>
struct through_pgbouncer {
    static constexpr std::size_t server_connections = ServerConnections;

    static pgbouncer_server& bouncer() {
        static pgbouncer_server server(pg_server::shared(), {.pool_size = static_cast<int>(ServerConnections)});
        return server;
    }

    static postgresql::store_options store_options(const std::string& direct_conninfo, std::size_t pool_size) {
        postgresql::store_options options;
        options.conninfo = bouncer().through(direct_conninfo);
        options.through = postgresql::pooler::transaction;
        options.pool_size = pool_size;
        return options;
    }
};

}  // namespace seqinbox::test
