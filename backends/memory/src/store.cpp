// The in-memory store: its tables, locks, visibility and durability; the transaction's operations
// are in transaction.cpp, the other concepts in actions.cpp, housekeeping.cpp and views.cpp.
#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "store_internals.hpp"

namespace seqinbox::memory {

store::store(store_options options) : options_(options) {}
store::~store() = default;

store::transaction store::begin() {
    std::lock_guard lock(mutex_);
    detail::tx_state* tx = nullptr;
    if (free_.empty()) {
        tx = pool_.emplace_back(std::make_unique<detail::tx_state>()).get();
    } else {
        tx = free_.back();  // reused: its vectors keep their capacity
        free_.pop_back();
    }
    tx->id = next_tx_++;
    tx->owner = detail::current_task;
    tx->ended = false;
    tx->dead = false;
    tx->loss_seen = false;
    tx->skip_flush = false;
    tx->flush_owed = false;
    tx->aborted = false;
    tx->lock_fault = false;
    open_.push_back(tx);
    return transaction(*this, tx);
}

sequence_instance store::create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                                timestamp created_at, timestamp retain_until) {
    yield_point("instance.create_or_get");
    std::lock_guard lock(mutex_);
    if (const auto* found = find_instance_row(sequence, context_id)) return public_row(*found);
    const instance_id id = next_instance_id_;
    unflushed_commit().created_instance = id;  // a creation does not wait for its WAL flush (synchronous_commit off)
    ++next_instance_id_;
    instance_row row;
    row.types.reserve(4);  // allocated beside the row (next on the heap), not later among other rows
    row.row = {id, sequence, context_id, instance_state::open, created_at, retain_until, {}};
    const auto [named, added_name] = sequence_numbers_.try_emplace(sequence, static_cast<std::uint32_t>(sequence_numbers_.size() + 1));
    if (added_name) sequence_names_.push_back(&named->first);
    row.sequence_number = named->second;
    const auto& added = instances_.add(id, std::move(row));
    index_instance(added);
    return added.row;
}

sequence_instance store::public_row(const instance_row& row) const {
    const auto& r = row.row;
    return {r.id, *sequence_names_[row.sequence_number - 1], r.context_id, r.state, r.created_at, r.retain_until, r.remove_after};
}

void store::index_instance(const instance_row& row) {
    instance_index_.insert(detail::instance_key_hash(row.row.sequence, row.row.context_id), reinterpret_cast<std::uintptr_t>(&row));
}

void store::unindex_instance(const instance_row& row) {
    instance_index_.erase(detail::instance_key_hash(row.row.sequence, row.row.context_id), reinterpret_cast<std::uintptr_t>(&row));
}

const detail::instance_row* store::find_instance_row(const std::string& sequence, const std::string& context_id) const {
    const auto number = sequence_numbers_.find(sequence);
    if (number == sequence_numbers_.end()) return nullptr;
    const auto found = instance_index_.find(detail::instance_key_hash(sequence, context_id), [&](std::uint64_t candidate) {
        const auto& row = *reinterpret_cast<const instance_row*>(candidate);
        return row.sequence_number == number->second && row.row.context_id == context_id;
    });
    const auto* row = reinterpret_cast<const instance_row*>(found);
    if (row != nullptr) instances_.note_recent(row->row.id, const_cast<instance_row&>(*row));
    return row;
}

std::size_t store::max_batch_records(bool listeners_join) const noexcept {
    const std::size_t most = options_.max_batch_records;
    if (most == 0) return std::numeric_limits<std::size_t>::max();
    return listeners_join ? std::max<std::size_t>(1, most / 2) : most;
}

stored_as store::store_message(message_record row) {
    auto tx = begin();
    const stored_as what = tx.store_message(std::move(row));
    tx.commit();
    return what;
}

stored_as store::store_message_beside(transaction& claim, message_record row) {
    {
        std::lock_guard lock(mutex_);
        claim.tx_->flush_owed = true;  // also when the outcome is unknown: it may have committed
    }
    auto tx = begin();
    tx.tx_->skip_flush = true;
    const stored_as what = tx.store_message(std::move(row));
    tx.commit();
    return what;
}

void store::ensure_usable(detail::tx_state& tx) {
    if (tx.dead) {
        tx.loss_seen = true;
        throw error(error_category::connection,
                    "connection lost: transaction " + std::to_string(tx.id) + " was rolled back", "57P01");
    }
    if (tx.ended) throw error(error_category::misuse, "transaction " + std::to_string(tx.id) + " already ended");
}

void store::ensure_not_aborted(const detail::tx_state& tx) {
    if (tx.aborted)
        throw error(error_category::internal,
                    "current transaction " + std::to_string(tx.id) + " is aborted, commands ignored until end of transaction block", "25P02");
}

void store::require_instance(instance_id id) const {
    if (!instances_.contains(id))
        throw error(error_category::retryable,
                    "sequence instance " + std::to_string(id) + " no longer exists (removed by housekeeping?)",
                    std::string(instance_removed_sqlstate));
}

// ---- visibility: committed rows overlaid with the transaction's own writes ----

std::optional<message_record> store::visible_message(detail::tx_state& tx, message_id id) const {
    if (auto* own = detail::find_in(tx.writes.messages, id, [](auto& r) { return r.id; })) return *own;
    const auto* row = committed_message(id);
    if (row == nullptr) return std::nullopt;
    return row->record(id);
}

const detail::stored_message* store::committed_message(message_id id) const {
    auto index = static_cast<std::size_t>(id - 1);
    return id > 0 && index < messages_.size() && messages_[index].exists ? &messages_[index] : nullptr;
}
detail::stored_message* store::committed_message(message_id id) {
    return const_cast<detail::stored_message*>(std::as_const(*this).committed_message(id));
}

int store::own_processed_delta(const detail::tx_state& tx, instance_id instance, const std::string& type) const {
    int delta = 0;
    for (const auto& own : tx.writes.messages) {
        if (own.instance != instance || own.type != type) continue;
        const auto* before = committed_message(own.id);
        if (before != nullptr && before->state == message_state::processed) --delta;
        if (own.state == message_state::processed) ++delta;
    }
    return delta;
}

std::vector<message_record> store::visible_messages(detail::tx_state& tx, const claim_key& key) const {
    std::vector<message_record> rows;
    for_each_committed(key, [&](message_id id, const auto&) { rows.push_back(*visible_message(tx, id)); });
    for (const auto& own : tx.writes.messages)
        if (own.key() == key && !committed_message(own.id)) rows.push_back(own);
    std::ranges::sort(rows, {}, &message_record::id);
    return rows;
}

// ---- locks ----

detail::claim_slot& store::hold_claim(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label) {
    auto& held = claims_.find_or_add(key);
    detail::claim_slot& slot = held.second;
    ++slot.waiters;  // keeps the slot while this transaction waits (claim_slot::unused)
    struct done_waiting {
        detail::claim_slot& slot;
        ~done_waiting() { --slot.waiters; }
    } done{slot};
    wait_while(lock, &tx, label, [&] { return slot.holder != 0 && slot.holder != tx.id; });
    if (slot.holder != tx.id) {
        slot.holder = tx.id;
        slot.pending = slot.committed;
        tx.locks.claims.push_back(&held);
    }
    return slot;
}

void store::lock_instance_row(lock_guard& lock, detail::tx_state& tx, instance_id id, std::string_view label) {
    wait_while(lock, &tx, label, [&] { return held_by_other(instance_locks_, id, tx); });
    require_instance(id);
    if (instance_locks_.try_emplace(id, tx.id).second) tx.locks.instances.push_back(id);
}

void store::lock_key(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label) {
    wait_while(lock, &tx, label, [&] { return held_by_other(key_locks_, key, tx); });
    if (key_locks_.contains(key)) return;  // this transaction's already
    take_lock_entry(tx, "storing a sequenced message");
    key_locks_.emplace(key, tx.id);
    tx.locks.keys.push_back(key);
}

void store::take_lock_entry(detail::tx_state& tx, std::string_view doing) {
    if (options_.lock_entries == 0 || tx.locks.keys.size() + tx.savepoints.size() < options_.lock_entries) return;
    ++lock_table_exhausted_;
    out_of_shared_memory(tx, doing);
}

void store::fail_if_armed(detail::tx_state& tx, std::string_view doing) {
    if (std::exchange(tx.lock_fault, false)) out_of_shared_memory(tx, doing);
}

void store::out_of_shared_memory(detail::tx_state& tx, std::string_view doing) {
    tx.aborted = true;
    throw error(error_category::retryable,
                "out of shared memory while " + std::string(doing) + " (the lock table is full; increase max_locks_per_transaction)",
                "53200");
}

void store::release_locks(detail::held_locks& locks, const detail::held_locks& kept) {
    for (std::size_t i = kept.claims.size(); i < locks.claims.size(); ++i) {
        locks.claims[i]->second.holder = 0;
        locks.claims[i]->second.pending.reset();
        claims_.release_if_unused(*locks.claims[i]);  // a claim rolled back, or deleted
    }
    for (std::size_t i = kept.instances.size(); i < locks.instances.size(); ++i) instance_locks_.erase(locks.instances[i]);
    for (std::size_t i = kept.messages.size(); i < locks.messages.size(); ++i) message_locks_.erase(locks.messages[i]);
    for (std::size_t i = kept.keys.size(); i < locks.keys.size(); ++i) key_locks_.erase(locks.keys[i]);
    locks.claims.resize(kept.claims.size());
    locks.instances.resize(kept.instances.size());
    locks.messages.resize(kept.messages.size());
    locks.keys.resize(kept.keys.size());
}

// ---- the transaction's own writes ----

message_id store::insert_own(detail::tx_state& tx, message_record row) {
    require_instance(row.instance);
    row.id = next_message_id_++;
    tx.writes.messages.push_back(std::move(row));
    message_locks_.emplace(tx.writes.messages.back().id, tx.id);
    tx.locks.messages.push_back(tx.writes.messages.back().id);
    return tx.writes.messages.back().id;
}

void store::update_own(lock_guard& lock, detail::tx_state& tx, message_id id, message_state state, timestamp now,
                       std::optional<envelope> payload, std::optional<std::int64_t> number) {
    wait_while(lock, &tx, "message.update", [&] { return held_by_other(message_locks_, id, tx); });
    auto row = visible_message(tx, id);
    if (!row) return;
    if (message_locks_.try_emplace(id, tx.id).second) tx.locks.messages.push_back(id);
    row->state = state;
    row->state_changed_at = now;
    if (payload) row->payload = std::move(payload);
    if (number) row->number = number;
    if (auto* own = detail::find_in(tx.writes.messages, id, [](auto& r) { return r.id; }))
        *own = std::move(*row);
    else
        tx.writes.messages.push_back(std::move(*row));
}

void store::finish(detail::tx_state& tx) {
    release_locks(tx.locks, {});
    tx.writes.messages.clear();
    tx.writes.closings.clear();
    tx.writes.skips.clear();
    tx.writes.kv.clear();
    tx.writes.cleared_actions.clear();
    tx.savepoints.clear();
    tx.ended = true;
    std::erase(open_, &tx);
    cv_.notify_all();
}

void store::kill(detail::tx_state& tx) {
    tx.dead = true;
    finish(tx);
}

// ---- commit: the transaction's writes become the committed tables ----

void store::forget_message_indexes(message_id id, const detail::stored_message& row) {
    auto& instance = instances_.at(row.instance);
    if (row.state == message_state::processed) --instance.types[row.type].processed;
    if (row.state == message_state::waiting) instance.types[row.type].waiting.erase(id);
    if (!row.number) return;
    if (row.state == message_state::processed) {
        auto it = instance.processed_numbers.find(*row.number);
        if (it != instance.processed_numbers.end() && --it->second == 0) instance.processed_numbers.erase(it);
    }
    if (row.state == message_state::waiting) instance.waiting_numbers.erase({*row.number, id});
}

void store::unindex_message_key(message_id id, const detail::stored_message& row) {
    row.slot->second.messages.remove(id);
    claims_.release_if_unused(*row.slot);
}

void store::index_message(message_id id, const detail::stored_message& row) {
    auto& instance = instances_.at(row.instance);
    if (row.state == message_state::processed) ++instance.types[row.type].processed;
    if (row.state == message_state::waiting) instance.types[row.type].waiting.insert(id);
    if (!row.number) return;
    if (row.state == message_state::processed) ++instance.processed_numbers[*row.number];
    if (row.state == message_state::waiting) instance.waiting_numbers.insert({*row.number, id});
}

void store::apply_message(message_record&& row, undo_record* undo) {
    const message_id id = row.id;
    auto* existing = committed_message(id);
    if (existing != nullptr) {
        forget_message_indexes(id, *existing);
        auto* slot = existing->slot;
        if (undo != nullptr) undo->messages.push_back({id, std::move(*existing)});
        *existing = detail::stored_message(std::move(row), slot);
        index_message(id, *existing);
        return;
    }
    if (undo != nullptr) undo->messages.push_back({id, std::nullopt});
    auto& slot = claims_.find_or_add(row.type, row.idempotence_id);  // the claim's, usually: found where the claim left it
    slot.second.messages.add(id);
    instances_.at(row.instance).messages.push_back(id);
    if (messages_.size() < static_cast<std::size_t>(id)) messages_.resize(static_cast<std::size_t>(id));
    auto& stored = messages_[static_cast<std::size_t>(id) - 1];
    stored = detail::stored_message(std::move(row), &slot);
    index_message(id, stored);
}

void store::apply(detail::tx_state& tx, undo_record* undo) {
    for (auto* held : tx.locks.claims) {
        auto& slot = held->second;
        const bool listed = slot.pending && !slot.committed;
        if (undo != nullptr) undo->claims.push_back({held->first, slot.committed, listed});
        if (listed) instances_.at(slot.pending->instance).claims.push_back(held);
        slot.committed = slot.pending;
    }
    for (auto& row : tx.writes.messages) apply_message(std::move(row), undo);
    for (const auto& [id, at] : tx.writes.closings) {
        auto& instance = instances_.at(id);
        if (undo != nullptr) undo->closings.push_back({id, instance.row.state, instance.closed_at});
        instance.row.state = instance_state::closed;
        instance.closed_at = at;
    }
    for (const auto& [id, through] : tx.writes.skips) {
        auto& skipped = instances_.at(id).skipped_through;
        if (undo != nullptr) undo->skips.emplace_back(id, skipped);
        skipped = std::max(skipped.value_or(through), through);
    }
    for (auto& [key, value] : tx.writes.kv) {
        if (undo != nullptr) undo->kv.emplace_back(key, detail::find_value(kv_, key));
        kv_.insert_or_assign(key, value);
    }
    for (const auto& [instance, read] : tx.writes.cleared_actions) {  // a request replaced since stays
        if (read.on_instance && detail::erase_if_equal(instance_actions_, instance, *read.on_instance) && undo != nullptr)
            undo->cleared_instance_actions.emplace_back(instance, *read.on_instance);
        for (const auto& request : read.on_messages)
            if (detail::erase_if_equal(message_actions_, request.message, request) && undo != nullptr)
                undo->cleared_message_actions.push_back(request);
    }
}

}  // namespace seqinbox::memory
