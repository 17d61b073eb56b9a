// Housekeeping (seqinbox::housekeeping_store): job locks, finding closed, expired and removable
// instances, and removing an instance with its rows.
#include <memory>
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

std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit) {
    std::vector<std::string> names;
    std::string seconds;  // "3600,60": numbers need no encoding
    for (const auto& w : windows) {
        names.push_back(w.sequence);
        seconds += (seconds.empty() ? "" : ",") + std::to_string(w.window.count());
    }
    // The sequence's window from `windows`, else the instance's own retention. A CLOSED row
    // without closed_at (not written by seqinbox) counts from its creation.
    const std::string window =
        "COALESCE((SELECT CAST(w.seconds AS bigint) * INTERVAL '1 second' FROM unnest(string_to_array(:names, ','),"
        " string_to_array(:seconds, ',')) AS w(name, seconds) WHERE convert_from(decode(w.name, 'hex'), 'UTF8') = sequence_instance.name),"
        " retain_until - created_at)";
    return instance_ids("finding closed instances past their deduplication window",
                        "state = 'CLOSED' AND COALESCE(closed_at, created_at) + " + window + " <= " + sql_timestamp(":now") +
                            " ORDER BY id",
                        limit, detail::encode_list(names), seconds, to_microseconds(now));
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit) {
    return instance_ids("finding instances to remove",
                        "state = 'OPEN' AND remove_after <= " + sql_timestamp(":now") + " ORDER BY remove_after, id", limit,
                        to_microseconds(now));
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

std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit) {
    const long long at = to_microseconds(now), seconds = delay.count();
    return instances_where("marking expired instances",
                           "UPDATE sequence_instance SET remove_after = retain_until + :delay * INTERVAL '1 second'"
                           " WHERE id IN (SELECT id FROM sequence_instance WHERE state = 'OPEN' AND remove_after IS NULL"
                           " AND retain_until < " + sql_timestamp(":now") +
                               " ORDER BY retain_until LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) RETURNING " +
                               detail::instance_columns_sql(),
                           limit, seconds, at);
}

bool store::remove_instance(instance_id id, const forward_waiting& forward) {
    auto tx = begin();
    const auto instance = one_instance(tx, "locking an instance to remove it", "id = :id FOR UPDATE", id);
    if (!instance) return false;  // gone already; `tx` rolls back
    const auto waiting_types = tx.message_types(id).waiting;
    forward(*instance, tx.waiting_messages(id, waiting_types));
    run_in(tx, "removing an instance", [&](detail::connection& c) { c.session() << "DELETE FROM sequence_instance WHERE id = :id", soci::use(id); });
    tx.commit();
    pool_->instances().forget(id);
    return true;
}

}  // namespace seqinbox::postgresql
