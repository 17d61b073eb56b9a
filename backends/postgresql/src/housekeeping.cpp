// Housekeeping (seqinbox::housekeeping_store): job locks, finding closed, expired and removable
// instances, and removing an instance with its rows.
#include <algorithm>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <string>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>

#include "connection.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql {

using detail::sql_timestamp;
using detail::to_microseconds;

struct store::job_lock::impl {
    impl(detail::lease leased, std::string lock_key) : conn(std::move(leased)), key(std::move(lock_key)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    detail::lease conn;
    std::string key;  // hashed by the server into the one-key advisory lock space
    ~impl() {
        if (!conn) return;
        try {
            conn->session() << "SELECT pg_advisory_unlock(hashtextextended(:key, 0))", soci::use(key);
        } catch (...) {
            conn->mark_broken();  // closing the session releases the lock
        }
    }
};

store::job_lock::job_lock() noexcept = default;
store::job_lock::job_lock(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
store::job_lock::job_lock(job_lock&&) noexcept = default;
store::job_lock& store::job_lock::operator=(job_lock&&) noexcept = default;
store::job_lock::~job_lock() = default;

store::job_lock store::try_lock_job(const std::string& job) {
    auto state = std::make_unique<job_lock::impl>(pool_->acquire(), "seqinbox.job:" + job);
    int got = 0;
    try {
        state->conn->count_round_trip();
        state->conn->session() << "SELECT CAST(pg_try_advisory_lock(hashtextextended(:key, 0)) AS integer)", soci::use(state->key),
            soci::into(got);
    } catch (const soci::soci_error& e) {
        state->conn->mark_broken();
        detail::fail(*state->conn.operator->(), e, "taking the lock of housekeeping job " + job, pool_->options().conninfo);
    }
    if (got != 1) {
        state->conn.release();  // held by another: nothing to unlock
        return {};
    }
    return job_lock(std::move(state));
}

namespace {

/// The keyset continuation of a scan by (column, id): rows after the position's (key, id).
std::string after_position(std::string_view column) {
    return " AND (" + std::string(column) + ", id) > (" + sql_timestamp(":after_key") + ", :after_id)";
}

}  // namespace

std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                                 scan_position& after) {
    std::vector<std::string> names;
    std::string seconds;  // "3600,60": numbers need no encoding
    for (const auto& w : windows) {
        names.push_back(w.sequence);
        seconds += (seconds.empty() ? "" : ",") + std::to_string(w.window.count());
    }
    // The sequence's window from `windows`, else the instance's own retention. A CLOSED row
    // without closed_at (not written by seqinbox) counts from its creation. By id through the
    // partial index of CLOSED rows (V7), from the position on.
    const std::string window =
        "COALESCE((SELECT CAST(w.seconds AS bigint) * INTERVAL '1 second' FROM unnest(string_to_array(:names, ','),"
        " string_to_array(:seconds, ',')) AS w(name, seconds) WHERE convert_from(decode(w.name, 'hex'), 'UTF8') = sequence_instance.name),"
        " retain_until - created_at)";
    auto ids = instance_ids("finding closed instances past their deduplication window",
                            "state = 'CLOSED' AND id > :after_id AND COALESCE(closed_at, created_at) + " + window + " <= " +
                                sql_timestamp(":now") + " ORDER BY id",
                            limit, static_cast<long long>(after.id), detail::encode_list(names), seconds, to_microseconds(now));
    if (!ids.empty()) after.id = ids.back();
    return ids;
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit, scan_position& after) {
    const auto rows = instances_where("finding instances to remove",
                                      "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND remove_after <= " +
                                          sql_timestamp(":now") + after_position("remove_after") + " ORDER BY remove_after, id LIMIT :limit",
                                      limit, to_microseconds(now), to_microseconds(after.key), static_cast<long long>(after.id));
    std::vector<instance_id> ids;
    for (const auto& row : rows) ids.push_back(row.id);
    if (!rows.empty()) after = {*rows.back().remove_after, rows.back().id};
    return ids;
}

template <class... Values>
std::vector<instance_id> store::instance_ids(std::string_view doing, const std::string& where, std::size_t limit, const Values&... values) {
    return autocommitted(doing, [&](detail::connection& c) {
        long long id = 0;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared(c.session(), "SELECT id FROM sequence_instance WHERE " + where + " LIMIT :limit",
                                              soci::into(id), soci::use(values)..., soci::use(max_rows));
        std::vector<instance_id> ids;
        detail::for_each_row(st, [&] { ids.push_back(id); });
        return ids;
    });
}

// Through the partial index of unmarked OPEN rows (V7): marked rows leave it, and the position
// passes over those the previous batches marked or skipped.
std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after) {
    const long long at = to_microseconds(now), seconds = delay.count();
    auto marked = instances_where("marking expired instances",
                                  "UPDATE sequence_instance SET remove_after = retain_until + :delay * INTERVAL '1 second'"
                                  " WHERE id IN (SELECT id FROM sequence_instance WHERE state = 'OPEN' AND remove_after IS NULL"
                                  " AND retain_until < " + sql_timestamp(":now") + after_position("retain_until") +
                                      " ORDER BY retain_until, id LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) RETURNING " +
                                      detail::instance_columns_sql(),
                                  limit, seconds, at, to_microseconds(after.key), static_cast<long long>(after.id));
    std::ranges::sort(marked, {}, [](const sequence_instance& i) { return std::pair(i.retain_until, i.id); });  // RETURNING has no order
    if (!marked.empty()) after = {marked.back().retain_until, marked.back().id};
    return marked;
}

// Locks in id order, as the engine takes instance locks, so that a batch never waits for a
// consumer in a cycle; the messages and claims go by the cascade of the instance rows.
std::size_t store::remove_instances(std::span<const instance_id> ids, const forward_waiting& forward) {
    if (ids.empty()) return 0;
    std::vector<std::string> listed;
    for (instance_id id : ids) listed.push_back(std::to_string(id));
    const std::string id_array = detail::array_literal(listed);
    auto tx = begin();
    std::vector<sequence_instance> locked;
    run_in(tx, "locking instances to remove them", [&](detail::connection& c) {
        detail::instance_columns row;
        soci::statement st = detail::prepared_with(c.session(),
                                                   "SELECT " + detail::instance_columns_sql() +
                                                       " FROM sequence_instance WHERE id = ANY (CAST(:ids AS bigint[])) ORDER BY id FOR UPDATE",
                                                   detail::into_instance(row), soci::use(id_array));
        detail::for_each_row(st, [&] { locked.push_back(detail::to_instance(row)); });
    });
    if (locked.empty()) return 0;  // gone already; `tx` rolls back
    std::vector<instance_id> locked_ids;
    for (const auto& instance : locked) locked_ids.push_back(instance.id);
    const auto waiting = tx.waiting_messages_of(locked_ids);
    for (const auto& instance : locked) {
        const auto first = std::ranges::find(waiting, instance.id, &message_record::instance);
        const auto last = std::find_if(first, waiting.end(), [&](const message_record& m) { return m.instance != instance.id; });
        forward(instance, std::span<const message_record>(first, last));
    }
    run_in(tx, "removing instances", [&](detail::connection& c) {
        c.session() << "DELETE FROM sequence_instance WHERE id = ANY (CAST(:ids AS bigint[]))", soci::use(id_array);
    });
    tx.commit();
    for (instance_id id : locked_ids) pool_->instances().forget(id);
    return locked.size();
}

}  // namespace seqinbox::postgresql
