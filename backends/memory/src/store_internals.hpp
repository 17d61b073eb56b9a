#pragma once
// What the store's sources share and its public header only declares: the member templates and
// the undo record a crash replays. Private to seqinbox::memory.
#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/memory/store.hpp"

namespace seqinbox::memory {

/// What one unflushed commit changed, as the values it replaced: a crash that loses the commit
/// puts them back, newest commit first and each commit's changes in reverse order, so that every
/// change meets the state it was made on. Costs what the commit changed (see testing::crash).
struct store::undo_record {
    struct claim_change {
        claim_key key;  // by key: a slot nothing refers to is given back, and its key's may be another
        std::optional<detail::claim_row> before;
        bool listed;  // the key was appended to its instance's claims
    };
    struct message_change {
        message_id id;
        std::optional<detail::stored_message> before;  // none: the commit inserted the row
    };
    struct closing_change {
        instance_id id;
        instance_state state;
        std::optional<timestamp> closed_at;
    };
    instance_id next_instance_id;
    message_id next_message_id;
    std::optional<instance_id> created_instance;
    std::vector<claim_change> claims;
    std::vector<message_change> messages;
    std::vector<closing_change> closings;
    std::vector<std::pair<instance_id, std::optional<std::int64_t>>> skips;  // skipped_through before
    std::vector<std::pair<std::string, std::optional<std::string>>> kv;
    std::vector<message_request> cleared_message_actions;
    std::vector<std::pair<instance_id, instance_request>> cleared_instance_actions;
};

template <class Conflict>
void store::wait_while(lock_guard& lock, detail::tx_state* tx, std::string_view label, Conflict conflict,
                       std::optional<std::chrono::milliseconds> patience) {
    if (!conflict()) return;  // the usual case: no clock read
    const auto deadline = std::chrono::steady_clock::now() + patience.value_or(options_.lock_timeout);
    while (conflict()) {
        if (detail::current_task != nullptr) {
            lock.unlock();
            detail::park(detail::task_run::blocked, label);
            lock.lock();
        } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && conflict()) {
            throw error(error_category::retryable,
                        std::string("lock timeout while waiting for ") + std::string(label), "55P03");
        }
        if (tx != nullptr) ensure_usable(*tx);
    }
}

template <class Op>
auto store::operate(detail::tx_state& tx, std::string_view label, Op op) {
    yield_point(label);
    lock_guard lock(mutex_);
    ensure_usable(tx);
    if (label != "rollback_to") ensure_not_aborted(tx);
    return op(lock);
}

template <class Id, class... Hash>
bool store::held_by_other(const std::unordered_map<Id, std::uint64_t, Hash...>& locks, const Id& id, const detail::tx_state& tx) {
    auto it = locks.find(id);
    return it != locks.end() && it->second != tx.id;
}

template <class Visit>
void store::for_each_committed(const claim_key& key, Visit visit) const {
    if (const auto* slot = claims_.find(key))
        slot->second.messages.for_each([&](message_id id) { visit(id, *committed_message(id)); });
}

template <class Pick, class OrderBy>
std::vector<instance_id> store::instances_where_locked(std::size_t limit, Pick pick, OrderBy order_by) const {
    using key = decltype(order_by(std::declval<const instance_row&>()));
    std::vector<std::pair<key, instance_id>> found;
    for (const auto& [id, row] : instances_)
        if (pick(row)) found.emplace_back(order_by(row), id);
    std::ranges::sort(found);
    std::vector<instance_id> ids;
    for (std::size_t i = 0; i < found.size() && i < limit; ++i) ids.push_back(found[i].second);
    return ids;
}

template <class Pick, class OrderBy>
std::vector<instance_id> store::instances_where(std::size_t limit, Pick pick, OrderBy order_by) const {
    std::lock_guard lock(mutex_);
    return instances_where_locked(limit, pick, order_by);
}

template <class Op>
auto store::transaction::run(std::string_view label, Op op) {
    if (store_ == nullptr) throw error(error_category::misuse, "use of a moved-from transaction");
    return store_->operate(*tx_, label, [&](lock_guard& lock) { return op(*store_, *tx_, lock); });
}

}  // namespace seqinbox::memory
