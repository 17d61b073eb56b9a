// The in-memory store's durability model (store.hpp, testing::crash): which commits wait for the
// WAL flush, and the undo records that let a crash lose the ones that did not.
#include <algorithm>
#include <ranges>
#include <utility>

#include "store_internals.hpp"

namespace seqinbox::memory {

store::undo_record& store::unflushed_commit() {
    auto& record = unflushed_.emplace_back();
    record.next_instance_id = next_instance_id_;
    record.next_message_id = next_message_id_;
    return record;
}

void store::flush_wal() {
    unflushed_.clear();
    ++wal_flushes_;
}

void store::settle_flush_owed(detail::tx_state& tx) {
    if (std::exchange(tx.flush_owed, false) && !tx.loss_seen) flush_wal();
}

bool store::writes_anything(const detail::tx_state& tx) {
    const auto& w = tx.writes;
    // A row lock (FOR NO KEY UPDATE) writes WAL too.
    return !w.messages.empty() || !w.closings.empty() || !w.skips.empty() || !w.kv.empty() || !w.cleared_actions.empty() ||
           !tx.locks.instances.empty() ||
           std::ranges::any_of(tx.locks.claims, [](const auto* held) { return held->second.pending.has_value() != held->second.committed.has_value(); });
}

void store::commit_durably(detail::tx_state& tx) {
    const bool writes = writes_anything(tx);
    apply(tx, writes && tx.skip_flush ? &unflushed_commit() : nullptr);
    if (writes && !tx.skip_flush) flush_wal();  // covers every earlier commit
    settle_flush_owed(tx);
}

void store::undo(undo_record& record) {
    for (auto& [id, request] : record.cleared_instance_actions) instance_actions_.insert_or_assign(id, std::move(request));
    for (auto& request : record.cleared_message_actions) message_actions_.insert_or_assign(request.message, std::move(request));
    for (auto& [key, before] : std::views::reverse(record.kv)) {
        if (before)
            kv_.insert_or_assign(key, std::move(*before));
        else
            kv_.erase(key);
    }
    for (auto& change : std::views::reverse(record.closings)) {
        auto& instance = instances_.at(change.id);
        instance.row.state = change.state;
        instance.closed_at = change.closed_at;
    }
    for (auto& [id, before] : std::views::reverse(record.skips)) instances_.at(id).skipped_through = before;
    for (auto& change : std::views::reverse(record.messages)) undo_message(change.id, std::move(change.before));
    for (auto& change : std::views::reverse(record.claims)) {
        auto& held = claims_.find_or_add(change.key);
        if (change.listed) instances_.at(held.second.committed->instance).claims.pop_back();
        held.second.committed = change.before;
        claims_.release_if_unused(held);
    }
    if (record.created_instance) {
        auto it = instances_.find(*record.created_instance);
        unindex_instance(it->second);
        instances_.erase(it);
    }
    next_instance_id_ = record.next_instance_id;
    next_message_id_ = record.next_message_id;
    messages_.resize(std::min(messages_.size(), static_cast<std::size_t>(next_message_id_ - 1)));
}

void store::undo_message(message_id id, std::optional<detail::stored_message>&& before) {
    auto& row = messages_[static_cast<std::size_t>(id) - 1];
    forget_message_indexes(id, row);
    if (before) {
        row = std::move(*before);
        index_message(id, row);
        return;
    }
    instances_.at(row.instance).messages.pop_back();  // the commit appended it; later ones are undone
    unindex_message_key(id, row);
    row = detail::stored_message{};
}

}  // namespace seqinbox::memory
