// seqinbox::mariadb::store: opening (schema check), transactions, statistics.
#include "seqinbox/mariadb/store.hpp"

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

namespace {

void check_schema(detail::connection& conn, const std::string& url) {
    int version = 0;
    try {
        conn.rows("SELECT COALESCE(MAX(version), 0) FROM seqinbox_schema_history",
                  [&](const detail::row& row) { version = static_cast<int>(detail::number_at(row, 0)); });
    } catch (const soci::soci_error& e) {
        if (detail::error_number(e) != 1146) throw;  // ER_NO_SUCH_TABLE: never migrated
    }
    if (version == latest_schema_version()) return;
    throw error(error_category::schema_mismatch,
                "the database '" + redact_url(url) + "' has MariaDB schema version " + std::to_string(version) + ", this library needs " +
                    std::to_string(latest_schema_version()) +
                    (version < latest_schema_version() ? "; run `seqinbox migrate` on it (seqinbox::mariadb::migrate)"
                                                       : "; upgrade seqinbox to the version that migrated this database"));
}

}  // namespace

store::store(store_options options) : pool_(std::make_shared<detail::pool>(std::move(options))) {
    detail::autocommitted(*pool_, "checking the schema", [&](detail::connection& conn) {
        check_schema(conn, pool_->options().url);
        pool_->durable_commits = conn.flush_setting() == 1;
        return 0;
    });
}

store::~store() = default;

store::transaction store::begin() {
    auto conn = pool_->acquire();
    return transaction(std::make_unique<transaction::impl>(pool_, std::move(conn)));
}

bool store::durable_commits() const noexcept { return pool_->durable_commits; }

store_statistics store::statistics() const {
    auto& c = pool_->counts();
    return {c.round_trips.load(), c.connections_opened.load(), c.connections_replaced.load()};
}

const store_options& store::options() const noexcept { return pool_->options(); }

}  // namespace seqinbox::mariadb
