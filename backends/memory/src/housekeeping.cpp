// The in-memory store's housekeeping (seqinbox::housekeeping_store) and the cascade of deleting
// an instance.
#include <algorithm>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store_internals.hpp"

namespace seqinbox::memory {

store::job_lock::job_lock(store* s, std::string job) : store_(s), job_(std::move(job)) {}

store::job_lock::job_lock(job_lock&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)), job_(std::move(other.job_)) {}

store::job_lock& store::job_lock::operator=(job_lock&& other) noexcept {
    if (this != &other) {
        release();
        store_ = std::exchange(other.store_, nullptr);
        job_ = std::move(other.job_);
    }
    return *this;
}

store::job_lock::~job_lock() { release(); }

void store::job_lock::release() noexcept {
    if (store_ == nullptr) return;
    std::lock_guard lock(store_->mutex_);
    store_->running_jobs_.erase(job_);
    store_ = nullptr;
}

store::job_lock store::try_lock_job(const std::string& job) {
    std::lock_guard lock(mutex_);
    if (!running_jobs_.insert(job).second) return {};
    return job_lock(this, job);
}

namespace {

/// Whether a row sorting by (key, id) comes after `after`.
bool sorts_after(timestamp key, instance_id id, const scan_position& after) { return std::pair(key, id) > std::pair(after.key, after.id); }

}  // namespace

std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                                 scan_position& after) const {
    auto window_end = [&](const instance_row& r) { return closed_window_end(r.row, r.closed_at, windows); };
    std::lock_guard lock(mutex_);
    auto ids = instances_where_locked(limit, [&](const instance_row& r) {
        return r.row.state == instance_state::closed && window_end(r) <= now && sorts_after(window_end(r), r.row.id, after);
    }, window_end);
    if (!ids.empty()) after = {window_end(instances_.at(ids.back())), ids.back()};
    return ids;
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit, scan_position& after) const {
    std::lock_guard lock(mutex_);
    auto ids = instances_where_locked(limit, [&](const instance_row& r) {
        return r.row.state == instance_state::open && r.row.remove_after && *r.row.remove_after <= now && sorts_after(*r.row.remove_after, r.row.id, after);
    }, [](const instance_row& r) { return *r.row.remove_after; });
    if (!ids.empty()) after = {*instances_.at(ids.back()).row.remove_after, ids.back()};
    return ids;
}

// By id from `after`: the instances table is kept in id order, so the scan starts where the
// last batch stopped. (It passes over instances of other sequences: the memory store is for tests.)
std::vector<instance_id> store::stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after) const {
    std::lock_guard lock(mutex_);
    std::vector<instance_id> ids;
    for (auto it = instances_.after(after.id); it != instances_.end() && ids.size() < limit; ++it) {
        const instance_row& r = it->second;
        if (r.row.state != instance_state::open || r.row.sequence != sequence) continue;
        if (std::ranges::any_of(r.waiting_numbers, [&](const auto& w) { return committed_message(w.second)->created_at <= now; }))
            ids.push_back(it->first);
    }
    if (!ids.empty()) after.id = ids.back();
    return ids;
}

std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after) {
    yield_point("instance.mark_expired");
    std::lock_guard lock(mutex_);
    std::vector<sequence_instance> marked;
    for (auto id : instances_where_locked(limit, [&](const instance_row& r) {
             return r.row.state == instance_state::open && !r.row.remove_after && r.row.retain_until < now &&
                    sorts_after(r.row.retain_until, r.row.id, after) && !instance_locks_.contains(r.row.id);
         }, [](const instance_row& r) { return r.row.retain_until; })) {
        auto& row = instances_.at(id).row;
        row.remove_after = row.retain_until + delay;
        marked.push_back(row);
    }
    if (!marked.empty()) {
        after = {marked.back().retain_until, marked.back().id};
        flush_wal();
    }
    return marked;
}

bool store::referenced(instance_id id) const {
    if (instance_locks_.contains(id)) return true;
    return std::ranges::any_of(open_, [&](const detail::tx_state* tx) {
        return std::ranges::any_of(tx->writes.messages, [&](auto& m) { return m.instance == id; }) ||
               std::ranges::any_of(tx->locks.claims, [&](auto* c) { return c->second.pending && c->second.pending->instance == id; });
    });
}

namespace {

/// The bytes of a record that count towards forward_page_bytes.
std::size_t record_size(const message_record& m) {
    if (!m.payload) return 0;
    const auto length = [](const record_bytes& bytes) { return bytes ? bytes->size() : 0; };
    std::size_t size = length(m.payload->key) + length(m.payload->value);
    for (const auto& h : m.payload->headers) size += h.name.size() + h.value.size();
    return size;
}

}  // namespace

std::size_t store::remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward) {
    yield_point("instance.remove");
    lock_guard lock(mutex_);
    // Those a transaction holds are passed over, as PostgreSQL's SKIP LOCKED does; the rest are
    // checked again: one closed since its job found it is kept.
    std::vector<instance_id> removable;
    std::ranges::copy_if(ids, std::back_inserter(removable), [&](instance_id id) {
        const auto it = instances_.find(id);
        return it != instances_.end() && !referenced(id) && condition.holds(it->second.row, it->second.closed_at);
    });
    std::ranges::sort(removable);
    removable.erase(std::ranges::unique(removable).begin(), removable.end());
    // Under the store's mutex: no writer can slip in before the deletes; a throw keeps them all.
    for (instance_id id : removable) forward_waiting_of(instances_.at(id), forward);
    for (instance_id id : removable) erase_instance(instances_.find(id));
    if (!removable.empty()) flush_wal();
    return removable.size();
}

// Pages bounded as in PostgreSQL, so that a sink sees the same calls from both stores.
void store::forward_waiting_of(const instance_row& instance, const forward_waiting& forward) const {
    std::vector<message_record> page;
    std::size_t page_bytes = 0;
    for (message_id m : instance.messages) {
        const auto* row = committed_message(m);
        if (row == nullptr || row->state != message_state::waiting) continue;
        auto record = row->record(m);
        const std::size_t size = record_size(record);
        if (!page.empty() && (page.size() == forward_page_rows || page_bytes + size > forward_page_bytes)) {
            forward(instance.row, page);
            page.clear();
            page_bytes = 0;
        }
        page_bytes += size;
        page.push_back(std::move(record));
    }
    if (!page.empty()) forward(instance.row, page);
}

void store::erase_instance(detail::instance_table::iterator it) {
    const instance_id id = it->first;
    instance_actions_.erase(id);
    for (message_id m : it->second.messages) {
        message_actions_.erase(m);
        auto& row = *committed_message(m);
        unindex_message_key(m, row);
        row = detail::stored_message{};
    }
    // A slot stays while a transaction holds the key or waits for it (claim_slot::unused); one
    // listed here may have been given back and reused since its claim was deleted: it is checked.
    for (auto* c : it->second.claims) {
        if (c->second.committed && c->second.committed->instance == id) c->second.committed.reset();
        claims_.release_if_unused(*c);
    }
    unindex_instance(it->second);
    instances_.erase(it);
    cv_.notify_all();
}

}  // namespace seqinbox::memory
