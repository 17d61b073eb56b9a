// The PostgreSQL store: its construction (the schema check, the lock table's size behind
// max_batch_records), begin(), and the ways to a connection for the store's other parts
// (store_parts.hpp: actions.cpp, housekeeping.cpp, views.cpp; the transaction's state is in
// transaction_impl.hpp, its operations in transaction.cpp, claims.cpp, instances.cpp, messages.cpp).
#include "seqinbox/postgresql/store.hpp"

#include <memory>
#include <string>
#include <utility>

#include <soci/postgresql/soci-postgresql.h>

#include "connection.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::checked;

long long query_number(soci::session& session, const std::string& sql) {
    long long n = 0;
    session << sql, soci::into(n);
    return n;
}

std::string migrate_hint(const std::string& conninfo) {
    return "run `seqinbox migrate --postgres '" + redact_conninfo(conninfo) +
           "'` (or seqinbox::postgresql::migrate()) before starting the inbox";
}

/// The database must hold exactly the schema this library was built with.
void check_schema(soci::session& session, const std::string& conninfo) {
    const int latest = latest_schema_version();
    if (query_number(session, "SELECT CAST(to_regclass('seqinbox_schema_history') IS NOT NULL AS integer)") == 0)
        throw error(error_category::schema_mismatch, "the database of '" + redact_conninfo(conninfo) +
                                                         "' has no seqinbox schema (table seqinbox_schema_history is missing): " +
                                                         migrate_hint(conninfo));
    const long long version = query_number(session, "SELECT COALESCE(max(version), 0) FROM seqinbox_schema_history");
    if (version > latest)
        throw error(error_category::schema_mismatch,
                    "the seqinbox schema of '" + redact_conninfo(conninfo) + "' is at version " + std::to_string(version) +
                        ", newer than this library's " + std::to_string(latest) + ": upgrade seqinbox");
    const bool claim_table = query_number(session, "SELECT CAST(to_regclass('sequential_inbox_idempotence') IS NOT NULL AS integer)") == 1;
    if (version < latest || !claim_table)
        throw error(error_category::schema_mismatch,
                    "the seqinbox schema of '" + redact_conninfo(conninfo) + "' is at version " + std::to_string(version) +
                        (claim_table ? "" : " without the claim table sequential_inbox_idempotence") + "; this library needs version " +
                        std::to_string(latest) + ": " + migrate_hint(conninfo));
}

}  // namespace

store::store(store_options options) : pool_(std::make_shared<detail::pool>(std::move(options))) {
    auto conn = pool_->acquire();
    try {
        check_schema(conn->session(), pool_->options().conninfo);
        read_lock_table(conn->session());
    } catch (const soci::soci_error& e) {
        detail::fail(*conn.operator->(), e, "checking the seqinbox schema", pool_->options().conninfo);
    }
}

void store::read_lock_table(soci::session& session) {
    long long per_transaction = 0, connections = 0, prepared = 0;
    session << "SELECT current_setting('max_locks_per_transaction')::bigint, current_setting('max_connections')::bigint,"
               " current_setting('max_prepared_transactions')::bigint",
        soci::into(per_transaction), soci::into(connections), soci::into(prepared);
    lock_table_entries_ = static_cast<std::size_t>(per_transaction * (connections + prepared));
    lock_table_ = std::to_string(lock_table_entries_) + " entries (max_locks_per_transaction " + std::to_string(per_transaction) +
                  " x (max_connections " + std::to_string(connections) + " + max_prepared_transactions " + std::to_string(prepared) + "))";
}

std::size_t store::max_batch_records(bool listeners_join) const noexcept {
    constexpr std::size_t for_relations = 64;
    const std::size_t share = lock_table_entries_ / (2 * options().pool_size);
    const std::size_t per_record = listeners_join ? 2 : 1;
    return share > for_relations + per_record ? (share - for_relations) / per_record : 1;
}

const std::string& store::lock_table() const noexcept { return lock_table_; }

store::~store() = default;

store::transaction store::begin() {
    auto conn = pool_->acquire();
    return transaction(std::make_unique<transaction::impl>(pool_, std::move(conn)));
}

void store::run_autocommitted(std::string_view doing, const connection_work& work) {
    transaction::impl autocommit(pool_, pool_->acquire());
    autocommit.guarded(doing, work);
}

void store::run_in(transaction& tx, std::string_view doing, const connection_work& work) { checked(tx.impl_).read(doing, work); }

std::vector<detail::result> store::batch_in(transaction& tx, std::string_view doing, const batch_work& queue) {
    return checked(tx.impl_).batch(doing, queue);
}

store_statistics store::statistics() const {
    auto& c = pool_->counts();
    return {c.round_trips.load(), c.connections_opened.load(), c.connections_replaced.load(), c.unflushed_commits.load()};
}

const store_options& store::options() const noexcept { return pool_->options(); }

}  // namespace seqinbox::postgresql
