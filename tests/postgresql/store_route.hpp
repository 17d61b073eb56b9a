#pragma once
// How a test's store reaches the throwaway server: a route R gives the store's options for a
// database given by its direct conninfo (R::store_options(conninfo, pool_size)) and how many
// server connections the store may hold at once (R::server_connections). Tests parametrised by a
// route run directly (direct_route, here) and through PgBouncer (tests/pgbouncer/).
#include <cstddef>
#include <limits>
#include <string>

#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::test {

struct direct_route {
    static constexpr std::size_t server_connections = std::numeric_limits<std::size_t>::max();
    static postgresql::store_options store_options(const std::string& conninfo, std::size_t pool_size) {
        return {.conninfo = conninfo, .pool_size = pool_size};
    }
};

}  // namespace seqinbox::test
