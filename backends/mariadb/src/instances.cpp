// Sequence instances: create or get (store), the instance lock and the types read under it
// (store::transaction).
#include <algorithm>
#include <map>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::bytes_literal;

namespace {

std::string ids_listed(const std::vector<instance_id>& ids) {
    return detail::listed(ids, [](instance_id id) { return std::to_string(id); });
}

/// The instances `ids` (listed) with the distinct types of their PROCESSED and WAITING messages:
/// one row per (instance, state, type), or one with NULL type for an instance without any.
std::string instances_with_types_sql(const std::string& ids) {
    return "SELECT " + detail::instance_columns() + ", t.state, t.message_type FROM sequence_instance i LEFT JOIN"
           " (SELECT DISTINCT sequence_instance_id, state, message_type FROM sequenced_message"
           "  WHERE sequence_instance_id IN (" + ids + ") AND state IN ('PROCESSED', 'WAITING')) AS t"
           " ON t.sequence_instance_id = i.id WHERE i.id IN (" + ids + ") ORDER BY i.id, t.message_type";
}

/// Adds a row of instances_with_types_sql to `locks`.
void add_instance_row(std::map<instance_id, instance_lock>& locks, const soci::row& row) {
    const auto instance = detail::instance_at(row);
    auto& lock = locks[instance.id];
    lock.row = instance;
    constexpr std::size_t state_column = detail::instance_column_count;
    if (detail::null_at(row, state_column)) return;
    auto type = detail::text_at(row, state_column + 1);
    (detail::text_at(row, state_column) == "PROCESSED" ? lock.types.processed : lock.types.waiting).push_back(std::move(type));
}

std::string instance_removed(instance_id id) {
    return "sequence instance " + std::to_string(id) + " no longer exists (removed by housekeeping meanwhile); retry";
}

}  // namespace

std::map<instance_id, instance_lock> store::transaction::lock_instances(const std::vector<instance_id>& ids) {
    const std::string listed = ids_listed(ids);
    const std::string doing = "locking sequence instances " + listed;
    try {
        // The insert creates a missing lock row and locks an existing one (its duplicate key),
        // row by row in the order given; its foreign key fails for a removed instance.
        impl_->run(doing, "INSERT INTO sequence_instance_lock (sequence_instance_id) VALUES " +
                              detail::listed(ids, [](instance_id id) { return "(" + std::to_string(id) + ")"; }) +
                              " ON DUPLICATE KEY UPDATE sequence_instance_id = sequence_instance_id");
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate)
            for (auto id : ids) impl_->pool().instances().forget(id);
        throw;
    }
    std::map<instance_id, instance_lock> locks;
    impl_->rows(doing, instances_with_types_sql(listed), [&](const soci::row& row) { add_instance_row(locks, row); });
    for (auto id : ids)
        if (!locks.contains(id)) throw error(error_category::retryable, instance_removed(id), std::string(instance_removed_sqlstate));
    return locks;
}

instance_lock store::transaction::lock_instance(instance_id instance) { return lock_instances({instance}).at(instance); }

types_by_state store::transaction::message_types(instance_id instance) {
    std::map<instance_id, instance_lock> found;
    impl_->rows("reading the message types of sequence instance " + std::to_string(instance),
                instances_with_types_sql(std::to_string(instance)), [&](const soci::row& row) { add_instance_row(found, row); });
    if (!found.contains(instance))
        throw error(error_category::retryable, instance_removed(instance), std::string(instance_removed_sqlstate));
    return found.at(instance).types;
}

sequence_instance store::create_or_get_instance(const std::string& sequence, const std::string& context_id, timestamp created_at,
                                                timestamp retain_until) {
    if (auto cached = pool_->instances().find(sequence, context_id)) return *cached;
    const std::string where = " WHERE name = " + bytes_literal(sequence) + " AND context_id = " + bytes_literal(context_id);
    const auto read = [&](detail::connection& conn) {
        std::optional<sequence_instance> found;
        conn.rows("SELECT " + detail::instance_columns() + " FROM sequence_instance i" + where,
                  [&](const soci::row& row) { found = detail::instance_at(row); });
        return found;
    };
    auto instance = detail::autocommitted(*pool_, "creating or reading the sequence instance of context " + context_id, [&](detail::connection& conn) {
        if (auto found = read(conn)) return *found;
        // A plain insert: on a concurrent creation of the row it waits, then fails with a
        // duplicate key (1062) and the row is read again. ON DUPLICATE KEY UPDATE would lock the
        // existing row exclusively, waiting for every claim transaction of the instance.
        try {
            sequence_instance created{0, sequence, context_id, instance_state::open, created_at, retain_until, std::nullopt};
            conn.rows("INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until) VALUES (" +
                          bytes_literal(sequence) + ", " + bytes_literal(context_id) + ", 'OPEN', " + detail::time_literal(created_at) +
                          ", " + detail::time_literal(retain_until) + ") RETURNING id",
                      [&](const soci::row& row) { created.id = detail::number_at(row, 0); });
            return created;
        } catch (const soci::soci_error& e) {
            if (detail::error_number(e) != 1062) throw;
        }
        if (auto found = read(conn)) return *found;
        throw error(error_category::retryable, "the sequence instance of context " + context_id + " was created and removed meanwhile; retry");
    });
    pool_->instances().remember(instance);
    return instance;
}

std::vector<sequence_instance> store::create_or_get_instances(std::span<const instance_creation> requests) {
    std::vector<sequence_instance> out;
    out.reserve(requests.size());
    for (const auto& r : requests) out.push_back(create_or_get_instance(r.sequence, r.context_id, r.created_at, r.retain_until));
    return out;
}

void store::forget_instance(instance_id id) { pool_->instances().forget(id); }

}  // namespace seqinbox::mariadb
