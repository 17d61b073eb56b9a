// Sequence instances: create or get (store), the instance lock and the types read under it
// (store::transaction).
#include <algorithm>
#include <map>

#include "codec.hpp"
#include "connection.hpp"
#include "locked_reads.hpp"
#include "seqinbox/error.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::bytes_literal;

namespace {

std::string ids_listed(const std::vector<instance_id>& ids) {
    return detail::listed(ids, [](instance_id id) { return std::to_string(id); });
}

/// The instances `ids` (listed), by primary key.
std::string instances_sql(const std::string& ids) {
    return "SELECT " + detail::instance_columns() + " FROM sequence_instance i WHERE i.id IN (" + ids + ")";
}

/// The distinct types of the PROCESSED and WAITING messages of the instances `ids` (listed): one
/// row per (instance, state, type). Apart from instances_sql, with neither a join nor a derived
/// table, so that schema V2's index answers it in its order without a temporary table.
std::string types_sql(const std::string& ids) {
    return "SELECT DISTINCT sequence_instance_id, state, message_type FROM sequenced_message WHERE sequence_instance_id IN (" + ids +
           ") AND state IN ('PROCESSED', 'WAITING')";
}

/// Adds a row of types_sql to the instance's entry of `locks`, when the instance was read.
void add_type_row(std::map<instance_id, instance_lock>& locks, const detail::row& row) {
    const auto found = locks.find(detail::number_at(row, 0));
    if (found == locks.end()) return;
    auto type = detail::text_at(row, 2);
    (detail::text_at(row, 1) == "PROCESSED" ? found->second.types.processed : found->second.types.waiting).push_back(std::move(type));
}

}  // namespace

namespace detail {

std::string lock_instances_sql(const std::vector<instance_id>& ids) {
    return "INSERT INTO sequence_instance_lock (sequence_instance_id) VALUES " +
           listed(ids, [](instance_id id) { return "(" + std::to_string(id) + ")"; }) +
           " ON DUPLICATE KEY UPDATE sequence_instance_id = sequence_instance_id";
}

std::string lock_won_instances_sql(const std::vector<claim_key>& keys, long long token) {
    // Neither DISTINCT nor a derived table (each a temporary table): an instance of several won
    // claims comes once per claim, and its second insert finds the lock row its own.
    return "INSERT INTO sequence_instance_lock (sequence_instance_id) SELECT c.sequence_instance_id FROM sequential_inbox_idempotence c"
           " WHERE c.claim_token = " + std::to_string(token) + " AND (" + any_key(keys, "c.") +
           ") ORDER BY c.sequence_instance_id ON DUPLICATE KEY UPDATE sequence_instance_lock.sequence_instance_id ="
           " sequence_instance_lock.sequence_instance_id";
}

void read_instances_with_types(const std::vector<instance_id>& ids, std::map<instance_id, instance_lock>& locks,
                               std::vector<statement>& into) {
    const std::string listed = ids_listed(ids);
    into.push_back({instances_sql(listed), [&locks](const row& r) {
                        const auto instance = instance_at(r);
                        locks[instance.id].row = instance;
                    }});
    into.push_back({types_sql(listed), [&locks](const row& r) { add_type_row(locks, r); }});
}

void finish_instances(const std::vector<instance_id>& ids, std::map<instance_id, instance_lock>& locks) {
    for (auto& [id, lock] : locks) {
        std::sort(lock.types.processed.begin(), lock.types.processed.end());
        std::sort(lock.types.waiting.begin(), lock.types.waiting.end());
    }
    for (auto id : ids)
        if (!locks.contains(id))
            throw error(error_category::retryable,
                        "sequence instance " + std::to_string(id) + " no longer exists (removed by housekeeping meanwhile); retry",
                        std::string(instance_removed_sqlstate));
}

}  // namespace detail

std::map<instance_id, instance_lock> store::transaction::lock_instances(const std::vector<instance_id>& ids) {
    std::map<instance_id, instance_lock> locks;
    std::vector<detail::statement> statements{{detail::lock_instances_sql(ids)}};
    detail::read_instances_with_types(ids, locks, statements);
    try {
        impl_->send("locking sequence instances " + ids_listed(ids), std::move(statements));
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate)
            for (auto id : ids) impl_->pool().instances().forget(id);
        throw;
    }
    detail::finish_instances(ids, locks);
    return locks;
}

instance_lock store::transaction::lock_instance(instance_id instance) { return lock_instances({instance}).at(instance); }

types_by_state store::transaction::message_types(instance_id instance) {
    std::map<instance_id, instance_lock> found;
    std::vector<detail::statement> statements;
    detail::read_instances_with_types({instance}, found, statements);
    impl_->send("reading the message types of sequence instance " + std::to_string(instance), std::move(statements));
    detail::finish_instances({instance}, found);
    return found.at(instance).types;
}

sequence_instance store::create_or_get_instance(const std::string& sequence, const std::string& context_id, timestamp created_at,
                                                timestamp retain_until) {
    if (auto cached = pool_->instances().find(sequence, context_id)) return *cached;
    const std::string where = " WHERE name = " + bytes_literal(sequence) + " AND context_id = " + bytes_literal(context_id);
    const auto read = [&](detail::connection& conn) {
        std::optional<sequence_instance> found;
        conn.rows("SELECT " + detail::instance_columns() + " FROM sequence_instance i" + where,
                  [&](const detail::row& row) { found = detail::instance_at(row); });
        return found;
    };
    auto instance = detail::autocommitted(*pool_, "creating or reading the sequence instance of context " + context_id, [&](detail::connection& conn) {
        // Read first: a plain read waits for no lock (an insert would wait for a writer holding the
        // row, e.g. a commit closing the instance or housekeeping removing it). Then a plain
        // insert: on a concurrent creation of the row it waits, then fails with a duplicate key
        // (1062) and the row is read again. ON DUPLICATE KEY UPDATE would lock the existing row
        // exclusively, waiting for every claim transaction of the instance.
        if (auto found = read(conn)) return *found;
        try {
            sequence_instance created{0, sequence, context_id, instance_state::open, created_at, retain_until, std::nullopt};
            conn.rows("INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until) VALUES (" +
                          bytes_literal(sequence) + ", " + bytes_literal(context_id) + ", 'OPEN', " + detail::time_literal(created_at) +
                          ", " + detail::time_literal(retain_until) + ") RETURNING id",
                      [&](const detail::row& row) { created.id = detail::number_at(row, 0); });
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
