#pragma once
// Private to seqinbox::mariadb: work on a leased connection outside any transaction (each
// statement autocommitted), for the parts of the store that need no transaction of their own.
#include <string_view>
#include <utility>

#include <soci/soci.h>

#include "connection.hpp"
#include "pool.hpp"

namespace seqinbox::mariadb::detail {

/// What `op(connection&)` returns, run on a leased connection; a SOCI failure becomes
/// seqinbox::error (a lost connection is dropped from the pool).
template <class Op>
auto autocommitted(pool& owner, std::string_view doing, Op&& op) {
    lease conn = owner.acquire();
    try {
        return std::forward<Op>(op)(*conn);
    } catch (const soci::soci_error& e) {
        fail(*conn, e, doing, owner.options().url);
    }
}

}  // namespace seqinbox::mariadb::detail
