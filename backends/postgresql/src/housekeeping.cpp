// Housekeeping (seqinbox::housekeeping_store): job locks, finding closed, expired and removable
// instances, and removing an instance with its rows.
#include <algorithm>
#include <memory>
#include <optional>
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

namespace {

/// In a transaction: takes the job's advisory lock, held until the transaction ends. 1 when taken.
const detail::named_sql& job_lock_sql() {
    static const detail::named_sql s =
        detail::named("job_lock", "SELECT CAST(pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS integer)");
    return s;
}

/// Sent after job_lock_sql, a statement that needs no snapshot: the SELECT's portal, which keeps
/// its snapshot (and so the server's xmin horizon for vacuum and CREATE INDEX CONCURRENTLY) while
/// it is open, closes when the next statement starts. It lifts the idle-in-transaction timeout
/// for the lock's transaction, which idles while the job runs.
const detail::named_sql& job_lock_idle_sql() {
    static const detail::named_sql s = detail::named("job_lock_idle", "SET LOCAL idle_in_transaction_session_timeout = 0");
    return s;
}

}  // namespace

// The lock belongs to a transaction left open while the job runs, not to the session: through a
// transaction pooler the session's server connection changes between transactions, while an
// open transaction keeps its own. A lost connection or a crashed holder ends the transaction and
// the lock with it.
struct store::job_lock::impl {
    explicit impl(detail::lease leased) : conn(std::move(leased)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    detail::lease conn;
    ~impl() {
        if (!conn) return;
        try {
            conn->count_round_trip();
            conn->session().commit();
        } catch (...) {
            conn->mark_broken();  // closing the session ends the transaction and releases the lock
        }
    }
};

store::job_lock::job_lock() noexcept = default;
store::job_lock::job_lock(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
store::job_lock::job_lock(job_lock&&) noexcept = default;
store::job_lock& store::job_lock::operator=(job_lock&&) noexcept = default;
store::job_lock::~job_lock() = default;

store::job_lock store::try_lock_job(const std::string& job) {
    auto state = std::make_unique<job_lock::impl>(pool_->acquire());
    detail::connection& c = *state->conn.operator->();
    try {
        c.count_round_trip();
        auto statements = c.batch();
        statements.statement(detail::begin_sql(), {});
        const auto taken = statements.statement(job_lock_sql(), {"seqinbox.job:" + job});
        statements.statement(job_lock_idle_sql(), {});
        if (statements.run().at(taken).number(0, 0) == 1) return job_lock(std::move(state));
        c.count_round_trip();
        c.session().rollback();  // held by another
    } catch (const soci::soci_error& e) {
        c.mark_broken();
        detail::fail(c, e, "taking the lock of housekeeping job " + job, pool_->options().conninfo);
    }
    state->conn.release();
    return {};
}

namespace {

std::string position_id(const scan_position& p) { return std::to_string(p.id); }

/// The ids of the instances as a bigint[] parameter.
std::string id_array(std::span<const instance_id> ids) {
    std::vector<std::string> listed;
    for (instance_id id : ids) listed.push_back(std::to_string(id));
    return detail::array_literal(listed);
}

std::vector<sequence_instance> instances_of(const detail::result& r) {
    std::vector<sequence_instance> rows;
    for (int i = 0; i < r.rows(); ++i) rows.push_back(detail::instance_row(r, i));
    return rows;
}

}  // namespace

// Every statement is prepared once per connection (named_sql) and runs autocommitted, one round
// trip: a batch's cost does not include preparing its statements.
detail::result store::autocommitted_statement(std::string_view doing, const detail::named_sql& sql, std::vector<detail::parameter> params) {
    return autocommitted(doing, [&](detail::connection& c) {
        auto batch = c.batch();
        batch.statement(sql, std::move(params));
        return batch.run().at(0);
    });
}

std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                                 scan_position& after) {
    std::vector<std::string> names;
    std::string seconds;  // "3600,60": numbers need no encoding
    for (const auto& w : windows) {
        names.push_back(w.sequence);
        seconds += (seconds.empty() ? "" : ",") + std::to_string(w.window.count());
    }
    const auto found = autocommitted_statement("finding closed instances past their deduplication window", detail::closed_instances_sql(),
                                               {detail::encode_list(names), seconds, detail::microseconds_text(now),
                                                detail::microseconds_text(after.key), position_id(after), std::to_string(limit)});
    std::vector<instance_id> ids;
    for (int i = 0; i < found.rows(); ++i) ids.push_back(found.number(i, 0));
    if (!ids.empty()) after = {detail::from_microseconds(found.number(found.rows() - 1, 1)), ids.back()};
    return ids;
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit, scan_position& after) {
    const auto rows = instances_of(autocommitted_statement(
        "finding instances to remove", detail::removable_instances_sql(),
        {detail::microseconds_text(now), detail::microseconds_text(after.key), position_id(after), std::to_string(limit)}));
    std::vector<instance_id> ids;
    for (const auto& row : rows) ids.push_back(row.id);
    if (!rows.empty()) after = {*rows.back().remove_after, rows.back().id};
    return ids;
}

std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after) {
    auto marked = instances_of(autocommitted_statement("marking expired instances", detail::expired_instances_mark_sql(),
                                                       {std::to_string(delay.count()), detail::microseconds_text(now),
                                                        detail::microseconds_text(after.key), position_id(after), std::to_string(limit)}));
    std::ranges::sort(marked, {}, [](const sequence_instance& i) { return std::pair(i.retain_until, i.id); });  // RETURNING has no order
    if (!marked.empty()) after = {marked.back().retain_until, marked.back().id};
    return marked;
}

namespace {

/// The locked instances for which `condition` holds, read from instances_lock_for_removal_sql.
std::vector<sequence_instance> still_removable(const detail::result& locked, const removal_condition& condition) {
    constexpr int closed_at_column = 7;
    std::vector<sequence_instance> kept;
    for (int i = 0; i < locked.rows(); ++i) {
        auto instance = detail::instance_row(locked, i);
        std::optional<timestamp> closed_at;
        if (!locked.null(i, closed_at_column)) closed_at = detail::from_microseconds(locked.number(i, closed_at_column));
        if (condition.holds(instance, closed_at)) kept.push_back(std::move(instance));
    }
    return kept;
}

}  // namespace

// Locks in id order what no writer holds (SKIP LOCKED: a delivery in progress may hold an
// instance for as long as its listener runs, and a stop of the service must not wait for it;
// the next run finds it again); the condition is checked on the rows as locked, the latest
// committed version. The messages and claims go by the cascade of the instance rows.
std::size_t store::remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward) {
    if (ids.empty()) return 0;
    auto tx = begin();
    std::size_t lock = 0;  // the answer's index: a BEGIN may come first
    const auto locked = batch_in(tx, "locking instances to remove them", [&](detail::pipeline& batch) {
        lock = batch.statement(detail::instances_lock_for_removal_sql(), {id_array(ids)});
    });
    const auto removable = still_removable(locked.at(lock), condition);
    if (removable.empty()) return 0;  // gone or changed; `tx` rolls back
    std::vector<instance_id> removable_ids;
    for (const auto& instance : removable) removable_ids.push_back(instance.id);
    const std::string listed = id_array(removable_ids);
    forward_waiting_pages(tx, listed, removable, forward);
    batch_in(tx, "removing instances", [&](detail::pipeline& batch) { batch.statement(detail::instances_delete_sql(), {listed}); });
    tx.commit();
    for (instance_id id : removable_ids) pool_->instances().forget(id);
    return removable_ids.size();
}

// One page in memory at a time: its result and its decoded rows, forwarded before the next is
// read. A page that took every candidate, fewer than a page's rows, is the last.
void store::forward_waiting_pages(transaction& tx, const std::string& listed, std::span<const sequence_instance> instances,
                                  const forward_waiting& forward) {
    constexpr int candidates_column = 14;
    instance_id after_instance = 0;
    message_id after_message = 0;
    for (bool more = true; more;) {
        std::size_t read = 0;
        const auto page = batch_in(tx, "reading the waiting messages of instances to remove", [&](detail::pipeline& batch) {
            read = batch.statement(detail::waiting_messages_page_sql(), {listed, std::to_string(after_instance), std::to_string(after_message),
                                                                 std::to_string(forward_page_rows), std::to_string(forward_page_bytes)});
        });
        const auto& rows = page.at(read);
        if (rows.rows() == 0) return;
        const auto candidates = static_cast<std::size_t>(rows.number(0, candidates_column));
        more = candidates == forward_page_rows || static_cast<std::size_t>(rows.rows()) < candidates;
        const auto waiting = detail::waiting_rows(rows);
        for (auto first = waiting.begin(); first != waiting.end();) {
            const auto last = std::find_if(first, waiting.end(), [&](const message_record& m) { return m.instance != first->instance; });
            forward(*std::ranges::find(instances, first->instance, &sequence_instance::id), std::span<const message_record>(first, last));
            first = last;
        }
        after_instance = waiting.back().instance;
        after_message = waiting.back().id;
    }
}

}  // namespace seqinbox::postgresql
