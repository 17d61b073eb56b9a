#pragma once
// The conformance fixture (tests/conformance/backend.hpp) for the PostgreSQL backend: every
// fixture object gets an empty database, copied from a template that is migrated once per program
// and holds the business table, or emptied after an earlier fixture (support/database_pool.hpp).
// The store reaches it by a Route (store_route.hpp): directly, or through PgBouncer for the
// topology tests; inspection always connects directly.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conformance/backend.hpp"
#include "pg_test_support.hpp"
#include "store_route.hpp"
#include "support/database_pool.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::conformance {

namespace detail {

/// A migrated database with the business table, used as CREATE DATABASE ... TEMPLATE.
inline const std::string& template_database() {
    static const std::string name = [] {
        auto& server = test::pg_server::shared();
        const std::string conninfo = server.create_database();
        postgresql::migrate(conninfo);
        soci::session s(soci::postgresql, conninfo);
        s << "CREATE TABLE business (key text PRIMARY KEY, value text NOT NULL)";
        std::string database;
        s << "SELECT current_database()", soci::into(database);
        return database;
    }();
    return name;
}

inline std::string new_database() {
    static std::atomic<int> counter{0};
    const std::string name = "conformance_" + std::to_string(++counter);
    soci::session admin(soci::postgresql, test::pg_server::shared().conninfo());
    admin << "CREATE DATABASE " + name + " TEMPLATE " + template_database();
    return test::pg_server::shared().conninfo(name);
}

inline void empty_database(const std::string& conninfo) {
    soci::session s(soci::postgresql, conninfo);
    s << "SET lock_timeout = '5s'";
    // DELETE, not TRUNCATE: the tables are tiny, and TRUNCATE makes new files for each.
    s << "DELETE FROM sequential_inbox_idempotence; DELETE FROM sequenced_message; DELETE FROM sequence_instance;"
         " DELETE FROM seqinbox_job_lease; DELETE FROM business;"
         " SELECT setval(pg_get_serial_sequence('sequence_instance', 'id'), 1, false),"
         " setval(pg_get_serial_sequence('sequenced_message', 'id'), 1, false)";
}

inline test::database_pool& databases() {
    static test::database_pool pool(new_database, empty_database);
    return pool;
}

template <class Route>
postgresql::store_options fixture_options(const std::string& conninfo) {
    return Route::store_options(conninfo, 24);  // the concurrency case runs 8 threads, each may need two connections
}

inline message_state parse_state(const std::string& s) {
    return s == "WAITING" ? message_state::waiting : s == "PROCESSED" ? message_state::processed : message_state::failed;
}

inline timestamp from_us(long long us) {
    return timestamp(std::chrono::duration_cast<timestamp::duration>(std::chrono::microseconds(us)));
}

}  // namespace detail

template <class Route>
struct basic_postgresql_backend : fixture_parts<postgresql::store> {
    using store_type = postgresql::store;

    basic_postgresql_backend()
        : database(detail::databases()),
          conninfo(database.connection()),
          store(detail::fixture_options<Route>(conninfo)),
          admin(soci::postgresql, conninfo) {}

    test::pooled_database database;
    std::string conninfo;  // direct
    store_type store;

    std::vector<message_record> messages_with_key(const claim_key& key) {
        return select_messages("WHERE message_type = :t AND idempotence_id = :i", key.type, key.idempotence_id);
    }
    std::vector<message_record> messages() { return select_messages("WHERE :t = :i", "", ""); }

    bool has_claim(const claim_key& key) {
        long long n = 0;
        admin << "SELECT count(*) FROM sequential_inbox_idempotence WHERE message_type = :t AND idempotence_id = :i",
            soci::use(key.type), soci::use(key.idempotence_id), soci::into(n);
        return n == 1;
    }
    std::size_t claim_count() { return static_cast<std::size_t>(test::count(admin, "SELECT count(*) FROM sequential_inbox_idempotence")); }

    std::vector<sequence_instance> instances() { return select_instances("WHERE :n = :c", "", ""); }
    std::optional<sequence_instance> find_instance(const std::string& sequence, const std::string& context_id) {
        auto rows = select_instances("WHERE name = :n AND context_id = :c", sequence, context_id);
        if (rows.empty()) return std::nullopt;
        return rows.front();
    }

    static void business_put(store_type::transaction& tx, const std::string& key, const std::string& value) {
        tx.session() << "INSERT INTO business (key, value) VALUES (:k, :v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            soci::use(key), soci::use(value);
    }
    std::optional<std::string> business_get(const std::string& key) {
        std::string value;
        soci::indicator found = soci::i_null;
        admin << "SELECT value FROM business WHERE key = :k", soci::use(key), soci::into(value, found);
        if (!admin.got_data() || found != soci::i_ok) return std::nullopt;
        return value;
    }
    static std::uint64_t transaction_id(store_type::transaction& tx) { return tx.id(); }

private:
    std::vector<message_record> select_messages(const std::string& where, const std::string& a, const std::string& b) {
        message_record row;
        long long id = 0, instance = 0, created = 0, changed = 0, number = 0;
        std::string state;
        soci::indicator number_null = soci::i_null;
        soci::statement st = (admin.prepare << "SELECT id, sequence_instance_id, message_type, idempotence_id, state,"
                                               " CAST(extract(epoch FROM created_at) * 1000000 AS bigint),"
                                               " CAST(extract(epoch FROM state_changed_at) * 1000000 AS bigint), sequence_number"
                                               " FROM sequenced_message " + where + " ORDER BY id",
                              soci::into(id), soci::into(instance), soci::into(row.type), soci::into(row.idempotence_id),
                              soci::into(state), soci::into(created), soci::into(changed), soci::into(number, number_null),
                              soci::use(a), soci::use(b));
        std::vector<message_record> rows;
        for (bool more = st.execute(true); more; more = st.fetch()) {
            row.id = id;
            row.instance = instance;
            row.state = detail::parse_state(state);
            row.created_at = detail::from_us(created);
            row.state_changed_at = detail::from_us(changed);
            row.number = number_null == soci::i_ok ? std::optional<std::int64_t>(number) : std::nullopt;
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
        soci::statement st = (admin.prepare << "SELECT id, name, context_id, state,"
                                               " CAST(extract(epoch FROM created_at) * 1000000 AS bigint),"
                                               " CAST(extract(epoch FROM retain_until) * 1000000 AS bigint),"
                                               " CAST(extract(epoch FROM remove_after) * 1000000 AS bigint)"
                                               " FROM sequence_instance " + where + " ORDER BY id",
                              soci::into(id), soci::into(row.sequence), soci::into(row.context_id), soci::into(state),
                              soci::into(created), soci::into(retain), soci::into(remove, remove_null), soci::use(a), soci::use(b));
        std::vector<sequence_instance> rows;
        for (bool more = st.execute(true); more; more = st.fetch()) {
            row.id = id;
            row.state = state == "CLOSED" ? instance_state::closed : instance_state::open;
            row.created_at = detail::from_us(created);
            row.retain_until = detail::from_us(retain);
            row.remove_after.reset();
            if (remove_null == soci::i_ok) row.remove_after = detail::from_us(remove);
            rows.push_back(row);
        }
        return rows;
    }

    soci::session admin;  // inspection of committed state, autocommit
};

using postgresql_backend = basic_postgresql_backend<test::direct_route>;

static_assert(backend<postgresql_backend>, "postgresql_backend must model the conformance fixture contract");

}  // namespace seqinbox::conformance
