// The in-memory store's test hooks (memory/testing.hpp).
#include "seqinbox/memory/testing.hpp"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <utility>

#include "store_internals.hpp"

namespace seqinbox::memory {

std::size_t testing::unflushed_commits(const store& s) {
    std::lock_guard lock(s.mutex_);
    return s.unflushed_.size();
}

std::size_t testing::wal_flushes(const store& s) {
    std::lock_guard lock(s.mutex_);
    return s.wal_flushes_;
}

void testing::crash(store& s, std::size_t keep) {
    std::lock_guard lock(s.mutex_);
    while (!s.open_.empty()) s.kill(*s.open_.front());
    for (auto& tx : s.pool_) tx->flush_owed = false;  // a flush now reaches the restarted server only
    for (; s.unflushed_.size() > keep; s.unflushed_.pop_back()) s.undo(s.unflushed_.back());
    s.unflushed_.clear();
    s.cv_.notify_all();
}

void testing::lose_connections_of(store& s, const detail::task_state* task) {
    std::lock_guard lock(s.mutex_);
    std::vector<detail::tx_state*> victims;  // kill() removes from open_: not while iterating it
    std::ranges::copy_if(s.open_, std::back_inserter(victims), [&](const detail::tx_state* tx) { return tx->owner == task; });
    for (auto* tx : victims) s.kill(*tx);
    s.cv_.notify_all();
}

void testing::lose_first_connection_of(store& s, const detail::task_state* task) {
    std::lock_guard lock(s.mutex_);
    auto first = std::ranges::find_if(s.open_, [&](const detail::tx_state* tx) { return tx->owner == task; });
    if (first == s.open_.end()) return;
    s.kill(**first);
    s.cv_.notify_all();
}

std::vector<instance_id> testing::instances_locked_by(const store& s, const detail::task_state* task) {
    std::lock_guard lock(s.mutex_);
    std::vector<instance_id> ids;
    for (const auto* tx : s.open_)
        if (tx->owner == task) ids.insert(ids.end(), tx->locks.instances.begin(), tx->locks.instances.end());
    return ids;
}

std::size_t testing::exhaust_lock_table(store& s, const detail::task_state* task) {
    std::lock_guard lock(s.mutex_);
    std::size_t armed = 0;
    for (auto* tx : s.open_)
        if (tx->owner == task) {
            tx->lock_fault = true;
            ++armed;
        }
    return armed;
}

std::size_t testing::lock_table_exhausted(const store& s) {
    std::lock_guard lock(s.mutex_);
    return s.lock_table_exhausted_;
}

void testing::delete_instance(store& s, instance_id id) {
    yield_point("instance.delete");
    store::lock_guard lock(s.mutex_);
    s.wait_while(lock, nullptr, "instance.delete", [&] { return s.referenced(id); });
    if (auto it = s.instances_.find(id); it != s.instances_.end()) {
        s.erase_instance(it);
        s.flush_wal();
    }
}

std::size_t testing::claim_slots(const store& s) {
    std::lock_guard lock(s.mutex_);
    return s.claims_.size();
}

std::optional<std::string> testing::kv_get(const store& s, const std::string& key) {
    std::lock_guard lock(s.mutex_);
    auto it = s.kv_.find(key);
    if (it == s.kv_.end()) return std::nullopt;
    return it->second;
}

bool testing::has_claim(const store& s, const claim_key& key) {
    std::lock_guard lock(s.mutex_);
    const auto* slot = s.claims_.find(key);
    return slot != nullptr && slot->second.committed.has_value();
}

}  // namespace seqinbox::memory
