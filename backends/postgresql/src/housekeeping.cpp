// Housekeeping (seqinbox::housekeeping_store): finding closed, expired and removable instances,
// and removing an instance with its rows (job leases: job_lease.cpp).
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
    constexpr int candidates_column = 15;
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
