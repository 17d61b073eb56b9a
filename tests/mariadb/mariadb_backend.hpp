#pragma once
// The conformance fixture (tests/conformance/backend.hpp) for the MariaDB store: every fixture
// object gets an empty migrated database with the business table on the test program's throwaway
// server: a new one, or one emptied after an earlier fixture (support/database_pool.hpp).
// Inspection reads committed state on a session of its own.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conformance/backend.hpp"
#include "mariadb_server.hpp"
#include "support/database_pool.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace seqinbox::conformance {

namespace detail {

inline std::string fresh_mariadb_database() {
    const std::string url = test::mariadb_server::shared().create_database();
    mariadb::migrate(url);
    soci::session s(soci::mysql, test::mariadb_server::shared().soci_connect(test::mariadb_server::database_of(url)));
    s << "CREATE TABLE business (k VARBINARY(255) PRIMARY KEY, value LONGBLOB NOT NULL) ENGINE = InnoDB";
    return url;
}

inline void empty_mariadb_database(const std::string& url) {
    soci::session s(soci::mysql, test::mariadb_server::shared().soci_connect(test::mariadb_server::database_of(url)));
    s << "SET SESSION innodb_lock_wait_timeout = 5";
    for (const char* table : {"sequenced_message_key_lock", "sequential_inbox_idempotence", "sequenced_message", "sequence_instance_lock",
                              "sequence_instance", "business"})
        s << std::string("DELETE FROM ") + table;
    s << "ALTER TABLE sequenced_message AUTO_INCREMENT = 1";
    s << "ALTER TABLE sequence_instance AUTO_INCREMENT = 1";
}

inline test::database_pool& mariadb_databases() {
    static test::database_pool pool(fresh_mariadb_database, empty_mariadb_database);
    return pool;
}

inline mariadb::store_options mariadb_fixture_options(const std::string& url) {
    mariadb::store_options options;
    options.url = url;
    options.pool_size = 24;  // the concurrency case runs 8 threads, each may need two connections
    return options;
}

inline timestamp from_mariadb_us(long long us) {
    return timestamp(std::chrono::duration_cast<timestamp::duration>(std::chrono::microseconds(us)));
}

/// `column` (DATETIME(6)) as microseconds since the epoch.
inline std::string us_of(const std::string& column) {
    return "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', " + column + ")";
}

}  // namespace detail

struct mariadb_backend : fixture_parts<mariadb::store> {
    using store_type = mariadb::store;

    mariadb_backend()
        : database(detail::mariadb_databases()),
          url(database.connection()),
          store(detail::mariadb_fixture_options(url)),
          admin(soci::mysql, test::mariadb_server::shared().soci_connect(test::mariadb_server::database_of(url))) {}

    test::pooled_database database;
    std::string url;
    store_type store;

    std::vector<message_record> messages_with_key(const claim_key& key) {
        return select_messages("WHERE message_type = :t AND idempotence_id = :i", key.type, key.idempotence_id);
    }
    std::vector<message_record> messages() { return select_messages("WHERE :t = :i", "", ""); }

    bool has_claim(const claim_key& key) {
        long long n = 0;
        admin << "SELECT count(*) FROM sequential_inbox_idempotence WHERE message_type = :t AND idempotence_id = :i", soci::use(key.type),
            soci::use(key.idempotence_id), soci::into(n);
        return n == 1;
    }
    std::size_t claim_count() {
        long long n = 0;
        admin << "SELECT count(*) FROM sequential_inbox_idempotence", soci::into(n);
        return static_cast<std::size_t>(n);
    }

    std::vector<sequence_instance> instances() { return select_instances("WHERE :n = :c", "", ""); }
    std::optional<sequence_instance> find_instance(const std::string& sequence, const std::string& context_id) {
        auto rows = select_instances("WHERE name = :n AND context_id = :c", sequence, context_id);
        if (rows.empty()) return std::nullopt;
        return rows.front();
    }

    static void business_put(store_type::transaction& tx, const std::string& key, const std::string& value) {
        tx.session() << "INSERT INTO business (k, value) VALUES (:k, :v) ON DUPLICATE KEY UPDATE value = VALUES(value)", soci::use(key),
            soci::use(value);
    }
    std::optional<std::string> business_get(const std::string& key) {
        std::string value;
        soci::indicator found = soci::i_null;
        admin << "SELECT value FROM business WHERE k = :k", soci::use(key), soci::into(value, found);
        if (!admin.got_data() || found != soci::i_ok) return std::nullopt;
        return value;
    }
    static std::uint64_t transaction_id(store_type::transaction& tx) { return tx.id(); }

    /// A session on the fixture's database for tests' own statements (autocommit).
    soci::session& inspection() { return admin; }

private:
    std::vector<message_record> select_messages(const std::string& where, const std::string& a, const std::string& b) {
        message_record row;
        long long id = 0, instance = 0, created = 0, changed = 0, number = 0;
        soci::indicator number_null = soci::i_null;
        std::string state;
        soci::statement st = (admin.prepare << "SELECT id, sequence_instance_id, message_type, idempotence_id, state, " +
                                                   detail::us_of("created_at") + ", " + detail::us_of("state_changed_at") +
                                                   ", sequence_number FROM sequenced_message " + where + " ORDER BY id",
                              soci::into(id), soci::into(instance), soci::into(row.type), soci::into(row.idempotence_id), soci::into(state),
                              soci::into(created), soci::into(changed), soci::into(number, number_null), soci::use(a), soci::use(b));
        std::vector<message_record> rows;
        for (bool more = st.execute(true); more; more = st.fetch()) {
            row.id = id;
            row.instance = instance;
            row.state = state == "WAITING" ? message_state::waiting : state == "PROCESSED" ? message_state::processed : message_state::failed;
            row.created_at = detail::from_mariadb_us(created);
            row.state_changed_at = detail::from_mariadb_us(changed);
            row.number.reset();
            if (number_null == soci::i_ok) row.number = number;
            rows.push_back(row);
        }
        for (auto& r : rows)
            if (r.state == message_state::waiting) r.payload = stored_record(r);
        return rows;
    }

    /// The record kept with a WAITING row, read back through the store itself.
    std::optional<envelope> stored_record(const message_record& waiting) {
        auto tx = store.begin();
        const std::string types[] = {waiting.type};
        for (auto& row : tx.waiting_messages(waiting.instance, types))
            if (row.id == waiting.id) return row.payload;
        return std::nullopt;
    }

    std::vector<sequence_instance> select_instances(const std::string& where, const std::string& a, const std::string& b) {
        sequence_instance row;
        long long id = 0, created = 0, retain = 0, remove = 0;
        soci::indicator remove_null = soci::i_null;
        std::string state;
        soci::statement st = (admin.prepare << "SELECT id, name, context_id, state, " + detail::us_of("created_at") + ", " +
                                                   detail::us_of("retain_until") + ", " + detail::us_of("remove_after") +
                                                   " FROM sequence_instance " + where + " ORDER BY id",
                              soci::into(id), soci::into(row.sequence), soci::into(row.context_id), soci::into(state), soci::into(created),
                              soci::into(retain), soci::into(remove, remove_null), soci::use(a), soci::use(b));
        std::vector<sequence_instance> rows;
        for (bool more = st.execute(true); more; more = st.fetch()) {
            row.id = id;
            row.state = state == "CLOSED" ? instance_state::closed : instance_state::open;
            row.created_at = detail::from_mariadb_us(created);
            row.retain_until = detail::from_mariadb_us(retain);
            row.remove_after.reset();
            if (remove_null == soci::i_ok) row.remove_after = detail::from_mariadb_us(remove);
            rows.push_back(row);
        }
        return rows;
    }

    soci::session admin;  // inspection of committed state, autocommit
};

static_assert(backend<mariadb_backend>, "mariadb_backend must model the conformance fixture contract");

}  // namespace seqinbox::conformance
