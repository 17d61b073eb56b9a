// Housekeeping (seqinbox::housekeeping_store): job locks, finding closed, expired and removable
// instances, and removing instances with their rows.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec.hpp"
#include "connection.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::microseconds_of;
using detail::number_at;
using detail::time_literal;

// A named lock (GET_LOCK) of the session of a pooled connection held while the job_lock lives.
// Named locks are the server's, not the database's: the name is the SHA-1 of the database's name
// and the job's, so that stores of two databases on one server do not exclude each other. A lost
// connection or a crashed holder ends the session and the lock with it.
struct store::job_lock::impl {
    explicit impl(detail::lease leased) : conn(std::move(leased)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    detail::lease conn;
    std::string name_sql;
    ~impl() {
        if (!conn || name_sql.empty()) return;
        try {
            conn->run("DO RELEASE_LOCK(" + name_sql + ")");
        } catch (...) {
            conn->mark_broken();  // the pool closes the session, which releases the lock
        }
    }
};

store::job_lock::job_lock() noexcept = default;
store::job_lock::job_lock(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
store::job_lock::job_lock(job_lock&&) noexcept = default;
store::job_lock& store::job_lock::operator=(job_lock&&) noexcept = default;
store::job_lock::~job_lock() = default;

bool store::job_lock::renew() {
    if (!impl_) return false;
    bool held = false;
    try {  // the session still holds it unless it was lost (and the server released the lock)
        impl_->conn->rows("SELECT COALESCE(IS_USED_LOCK(" + impl_->name_sql + ") = CONNECTION_ID(), 0)",
                          [&](const detail::row& r) { held = number_at(r, 0) == 1; });
    } catch (const soci::soci_error&) {
        impl_->conn->mark_broken();
    }
    if (!held) impl_.reset();
    return held;
}

store::job_lock store::try_lock_job(const std::string& job) {
    auto state = std::make_unique<job_lock::impl>(pool_->acquire());
    detail::connection& c = *state->conn;
    const std::string name = "SHA1(CONCAT(DATABASE(), X'00', " + detail::bytes_literal("seqinbox.job:" + job) + "))";
    try {
        bool taken = false;
        c.rows("SELECT COALESCE(GET_LOCK(" + name + ", 0), 0)", [&](const detail::row& r) { taken = number_at(r, 0) == 1; });
        if (taken) {
            state->name_sql = name;
            return job_lock(std::move(state));
        }
    } catch (const soci::soci_error& e) {
        detail::fail(c, e, "taking the lock of housekeeping job " + job, pool_->options().url);
    }
    return {};
}

namespace {

/// The keyset condition after `after` on (`key`, i.id); none from the start.
std::string after_key(const std::string& key, const scan_position& after) {
    if (after == scan_position{}) return {};
    const std::string at = time_literal(after.key);
    return " AND (" + key + " > " + at + " OR (" + key + " = " + at + " AND i.id > " + std::to_string(after.id) + "))";
}

std::string ids_listed(std::span<const instance_id> ids) {
    return detail::listed(ids, [](instance_id id) { return std::to_string(id); });
}

}  // namespace

namespace {

/// A (sequence, retention) group of CLOSED instances: one window length for all of them.
struct closed_group {
    std::string name;
    long long retention_us = 0;
};

/// Groups per query: bounds the text of one (a union of one range scan per group).
constexpr std::size_t groups_per_query = 100;

/// The window of `group`'s instances: the sequence's (the first listed), else their retention.
long long window_us(const closed_group& group, std::span<const deduplication_window> windows) {
    for (const auto& w : windows)
        if (w.sequence == group.name) return std::chrono::duration_cast<std::chrono::microseconds>(w.window).count();
    return group.retention_us;
}

timestamp moved_back(timestamp t, long long us) {
    return t - std::chrono::duration_cast<timestamp::duration>(std::chrono::microseconds(us));
}

/// One group's range scan of V3's index (state, name, retention_us, closed_key, id): within a
/// group the window ends in closing order, so the scan stops at the first instance still inside
/// its window. Its sort key is the window end (microseconds), the scan position's key.
std::string group_scan(const closed_group& group, long long window, timestamp now, const scan_position& after, std::size_t limit) {
    std::string sql = "(SELECT i.id, " + microseconds_of("i.closed_key") + " + " + std::to_string(window) +
                      " AS window_end FROM sequence_instance i WHERE i.state = 'CLOSED' AND i.name = " + detail::bytes_literal(group.name) +
                      " AND i.retention_us = " + std::to_string(group.retention_us) + " AND i.closed_key <= " + time_literal(moved_back(now, window));
    if (after != scan_position{}) sql += after_key("i.closed_key", {moved_back(after.key, window), after.id});
    return sql + " ORDER BY i.closed_key, i.id LIMIT " + std::to_string(limit) + ")";
}

/// Every group of CLOSED instances, one index descent each (InnoDB does not scan V3's index
/// loosely for a DISTINCT over its virtual column): each from the end of the group before,
/// backwards, so that it lands among the instances still inside their window rather than on the
/// entries of those cleanup deleted at a group's start, which InnoDB's purge removes later.
std::vector<closed_group> closed_groups(detail::connection& c) {
    std::vector<closed_group> groups;
    for (;;) {
        std::string before;
        if (!groups.empty()) {
            const std::string name = detail::bytes_literal(groups.back().name);
            before = " AND (name < " + name + " OR (name = " + name + " AND retention_us < " + std::to_string(groups.back().retention_us) + "))";
        }
        std::optional<closed_group> next;
        c.rows("SELECT name, retention_us FROM sequence_instance WHERE state = 'CLOSED'" + before +
                   " ORDER BY name DESC, retention_us DESC LIMIT 1",
               [&](const detail::row& r) { next = closed_group{std::string(r.bytes(0)), number_at(r, 1)}; });
        if (!next) return groups;
        groups.push_back(std::move(*next));
    }
}

struct window_passed {
    instance_id id;
    long long window_end_us;
};

}  // namespace

// Per batch: the groups (a round trip each), then per group (groups_per_query to a query) the range scan from the
// scan position, merged by window end: its cost grows with the groups and the batch, not with the
// CLOSED instances still inside their window.
std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                                 scan_position& after) {
    if (limit == 0) return {};
    return detail::autocommitted(*pool_, "finding closed instances past their deduplication window", [&](detail::connection& c) {
        const std::vector<closed_group> groups = closed_groups(c);
        std::vector<window_passed> found;
        for (std::size_t first = 0; first < groups.size(); first += groups_per_query) {
            std::string sql;
            for (std::size_t g = first; g < std::min(groups.size(), first + groups_per_query); ++g)
                sql += (sql.empty() ? "" : " UNION ALL ") + group_scan(groups[g], window_us(groups[g], windows), now, after, limit);
            c.rows(sql + " ORDER BY window_end, id LIMIT " + std::to_string(limit),
                   [&](const detail::row& r) { found.push_back({number_at(r, 0), number_at(r, 1)}); });
            std::ranges::sort(found, {}, [](const window_passed& w) { return std::pair(w.window_end_us, w.id); });
            if (found.size() > limit) found.resize(limit);
        }
        std::vector<instance_id> ids;
        for (const auto& w : found) ids.push_back(w.id);
        if (!found.empty()) after = {detail::from_microseconds(found.back().window_end_us), found.back().id};
        return ids;
    });
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit, scan_position& after) {
    auto rows = instances_where("finding instances to remove",
                                "i.state = 'OPEN' AND i.remove_after <= " + time_literal(now) + after_key("i.remove_after", after) +
                                    " ORDER BY i.remove_after, i.id",
                                limit);
    std::vector<instance_id> ids;
    for (const auto& row : rows) ids.push_back(row.id);
    if (!rows.empty()) after = {*rows.back().remove_after, rows.back().id};
    return ids;
}

// SKIP LOCKED passes over the instances a writer holds: a delivery's claim holds its instance's
// row shared (foreign key check) for as long as its listener runs.
std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after) {
    auto tx = begin();
    std::vector<instance_id> ids;
    tx.impl_->rows("marking expired instances",
                   "SELECT i.id FROM sequence_instance i WHERE i.state = 'OPEN' AND i.remove_after IS NULL AND i.retain_until < " +
                       time_literal(now) + after_key("i.retain_until", after) + " ORDER BY i.retain_until, i.id LIMIT " +
                       std::to_string(limit) + " FOR UPDATE SKIP LOCKED",
                   [&](const detail::row& r) { ids.push_back(number_at(r, 0)); });
    std::vector<sequence_instance> marked;
    if (ids.empty()) {
        tx.commit();
        return marked;
    }
    const std::string listed = ids_listed(ids);
    tx.impl_->run("marking expired instances", "UPDATE sequence_instance SET remove_after = TIMESTAMPADD(SECOND, " +
                                                   std::to_string(delay.count()) + ", retain_until) WHERE id IN (" + listed + ")");
    tx.impl_->rows("marking expired instances",
                   "SELECT " + detail::instance_columns() + " FROM sequence_instance i WHERE i.id IN (" + listed +
                       ") ORDER BY i.retain_until, i.id",
                   [&](const detail::row& r) { marked.push_back(detail::instance_at(r)); });
    tx.commit();
    if (!marked.empty()) after = {marked.back().retain_until, marked.back().id};
    return marked;
}

// Locks in id order the instance rows no writer holds (SKIP LOCKED), which keeps new claims and
// messages of them away (their foreign key checks wait), then their lock rows no delivery or job
// holds; checks the condition again under the locks, forwards the WAITING messages page by page,
// and deletes the instances (their claims, messages and lock rows cascade).
std::size_t store::remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward) {
    if (ids.empty()) return 0;
    std::vector<instance_id> sorted(ids.begin(), ids.end());
    std::ranges::sort(sorted);
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    auto tx = begin();
    const std::string doing = "removing instances";
    std::vector<std::pair<sequence_instance, std::optional<timestamp>>> locked;
    tx.impl_->rows(doing,
                   "SELECT " + detail::instance_columns() + ", " + microseconds_of("i.closed_at") + " FROM sequence_instance i WHERE i.id IN (" +
                       ids_listed(sorted) + ") ORDER BY i.id FOR UPDATE SKIP LOCKED",
                   [&](const detail::row& r) {
                       std::optional<timestamp> closed_at;
                       if (!detail::null_at(r, detail::instance_column_count))
                           closed_at = detail::from_microseconds(number_at(r, detail::instance_column_count));
                       locked.emplace_back(detail::instance_at(r), closed_at);
                   });
    std::vector<sequence_instance> kept;
    for (auto& [instance, closed_at] : locked)
        if (condition.holds(instance, closed_at)) kept.push_back(std::move(instance));
    if (kept.empty()) {
        tx.commit();
        return 0;
    }
    // Lock rows held by a delivery's release pass or an action job: those instances wait.
    std::vector<instance_id> candidates;
    for (const auto& instance : kept) candidates.push_back(instance.id);
    std::vector<instance_id> held;
    {
        std::vector<instance_id> free;
        tx.impl_->rows(doing, "SELECT sequence_instance_id FROM sequence_instance_lock WHERE sequence_instance_id IN (" +
                                  ids_listed(candidates) + ") ORDER BY sequence_instance_id FOR UPDATE SKIP LOCKED",
                       [&](const detail::row& r) { free.push_back(number_at(r, 0)); });
        std::vector<instance_id> with_rows;
        tx.impl_->rows(doing, "SELECT sequence_instance_id FROM sequence_instance_lock WHERE sequence_instance_id IN (" +
                                  ids_listed(candidates) + ")",
                       [&](const detail::row& r) { with_rows.push_back(number_at(r, 0)); });
        for (auto id : with_rows)
            if (std::ranges::find(free, id) == free.end()) held.push_back(id);
    }
    std::erase_if(kept, [&](const sequence_instance& i) { return std::ranges::find(held, i.id) != held.end(); });
    if (kept.empty()) {
        tx.commit();
        return 0;
    }
    for (const auto& instance : kept) forward_waiting_pages(tx, instance, forward);
    std::vector<instance_id> removed;
    for (const auto& instance : kept) removed.push_back(instance.id);
    tx.impl_->run(doing, "DELETE FROM sequence_instance WHERE id IN (" + ids_listed(removed) + ")");
    tx.commit();
    for (auto id : removed) pool_->instances().forget(id);
    return removed.size();
}

// Two reads per page: the sizes of the next rows (no payloads), then the records of those that
// fit the page (forward_page_rows, forward_page_bytes; a larger single record makes a page alone).
void store::forward_waiting_pages(transaction& tx, const sequence_instance& instance, const forward_waiting& forward) {
    const std::string doing = "reading the waiting messages of instance " + std::to_string(instance.id);
    for (message_id last = 0;;) {
        std::vector<std::pair<message_id, std::size_t>> sizes;
        tx.impl_->rows(doing,
                       "SELECT id, COALESCE(LENGTH(record_key), 0) + COALESCE(LENGTH(record_value), 0) + COALESCE(LENGTH(record_headers), 0)"
                       " FROM sequenced_message WHERE sequence_instance_id = " + std::to_string(instance.id) +
                           " AND state = 'WAITING' AND id > " + std::to_string(last) + " ORDER BY id LIMIT " +
                           std::to_string(forward_page_rows),
                       [&](const detail::row& r) { sizes.emplace_back(number_at(r, 0), static_cast<std::size_t>(number_at(r, 1))); });
        std::vector<message_id> page;
        std::size_t bytes = 0;
        for (const auto& [id, size] : sizes) {
            if (!page.empty() && bytes + size > forward_page_bytes) break;
            page.push_back(id);
            bytes += size;
        }
        if (page.empty()) return;
        std::vector<message_record> rows;
        tx.impl_->rows(doing,
                       "SELECT " + detail::message_columns_with_record() + " FROM sequenced_message m WHERE m.id IN (" +
                           detail::listed(page, [](message_id id) { return std::to_string(id); }) + ") ORDER BY m.id",
                       [&](const detail::row& r) { rows.push_back(detail::message_at(r, true)); });
        forward(instance, rows);
        last = page.back();
    }
}

}  // namespace seqinbox::mariadb
