#pragma once
// Row and transaction bookkeeping of the in-memory store. Internal: layouts change freely.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "seqinbox/memory/detail/hash_index.hpp"
#include "seqinbox/memory/detail/small_list.hpp"
#include "seqinbox/memory/detail/task_hook.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::memory::detail {

/// The hash of a pair of strings (a claim key, an instance's sequence and context id).
inline std::size_t pair_hash(std::string_view first, std::string_view second) noexcept {
    const std::size_t h = std::hash<std::string_view>{}(first);
    return h ^ (std::hash<std::string_view>{}(second) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

struct claim_key_hash {
    std::size_t operator()(const claim_key& k) const noexcept { return pair_hash(k.type, k.idempotence_id); }
};

struct claim_row {
    instance_id instance = 0;
    timestamp created_at{};
};

/// The ids of the committed message rows of one key: nearly always one, several in old databases.
class message_ids {
public:
    void add(message_id id) {
        if (first_ == 0)
            first_ = id;
        else
            more_.push_back(id);
    }
    bool empty() const noexcept { return first_ == 0; }
    void remove(message_id id) {
        if (first_ == id) {
            first_ = more_.empty() ? 0 : more_.back();
            if (!more_.empty()) more_.pop_back();
        } else {
            std::erase(more_, id);
        }
    }
    template <class Visit>
    void for_each(Visit visit) const {
        if (first_ == 0) return;
        visit(first_);
        for (message_id id : more_) visit(id);
    }

private:
    message_id first_ = 0;  // inline: the one row most keys have costs no allocation
    std::vector<message_id> more_;
};

/// One claim key: its committed row and, while a transaction holds the key, the row as that
/// transaction sees it. Holding the key is the row lock an insert or delete takes in PostgreSQL.
/// The slot also lists the key's committed message rows: the key's one index.
struct claim_slot {
    std::optional<claim_row> committed;
    std::uint64_t holder = 0;  // 0: nobody
    std::optional<claim_row> pending;
    message_ids messages;
    std::uint32_t waiters = 0;  // transactions waiting for the holder

    /// Nothing refers to the slot: it may be given to another key.
    bool unused() const noexcept { return !committed && holder == 0 && !pending && waiters == 0 && messages.empty(); }
};

using keyed_slot = std::pair<claim_key, claim_slot>;  // the key changes only when the slot is reused

/// A committed sequenced message; the payload lives on the heap because most rows have none,
/// shared (never changed in place) so that copying a row does not copy its payload.
struct stored_message {
    instance_id instance = 0;
    std::string type;
    std::string idempotence_id;
    message_state state = message_state::waiting;
    timestamp created_at{};
    timestamp state_changed_at{};
    std::shared_ptr<const envelope> payload;
    std::optional<std::int64_t> number;  // numbered sequences only
    keyed_slot* slot = nullptr;  // its key's (which lists it)
    bool exists = false;  // false: never committed, or removed by a cascade

    stored_message() = default;
    stored_message(message_record&& row, keyed_slot* key_slot)
        : instance(row.instance), type(std::move(row.type)), idempotence_id(std::move(row.idempotence_id)),
          state(row.state), created_at(row.created_at), state_changed_at(row.state_changed_at),
          payload(row.payload ? std::make_shared<const envelope>(std::move(*row.payload)) : nullptr), number(row.number), slot(key_slot),
          exists(true) {}

    message_record record(message_id id) const {
        message_record r{id, instance, type, idempotence_id, state, created_at, state_changed_at, std::nullopt};
        if (payload) r.payload = *payload;
        r.number = number;
        return r;
    }
};

/// Per-type counters of an instance; a sequence has few types, so a flat vector beats a map.
template <class Value>
class by_type {
public:
    Value& operator[](const std::string& type) {
        for (auto& [name, value] : entries_)
            if (name == type) return value;
        return entries_.emplace_back(type, Value{}).second;
    }
    const Value* find(const std::string& type) const {
        for (const auto& [name, value] : entries_)
            if (name == type) return &value;
        return nullptr;
    }
    auto begin() const { return entries_.begin(); }
    auto end() const { return entries_.end(); }
    void reserve(std::size_t types) { entries_.reserve(types); }

private:
    std::vector<std::pair<std::string, Value>> entries_;
};

/// An instance's committed rows of one type, as far as releasing needs them.
struct type_rows {
    int processed = 0;                // PROCESSED rows
    std::set<message_id> waiting;     // WAITING rows
};

struct instance_row {
    sequence_instance row;
    std::uint32_t sequence_number = 0;       // the store's number for row.sequence: compared without reading the name
    std::optional<timestamp> closed_at;     // when it was CLOSED
    by_type<type_rows> types;                // committed rows per type, in one place: one cache line to read
    small_list<message_id, 4> messages;      // every message row, for the cascade
    small_list<keyed_slot*, 4> claims;       // slots claimed for it, for the cascade
    // Numbered sequences: committed PROCESSED rows per number, WAITING rows by number, the
    // number its gaps were skipped through.
    std::map<std::int64_t, int> processed_numbers;
    std::set<std::pair<std::int64_t, message_id>> waiting_numbers;
    std::optional<std::int64_t> skipped_through;
};

/// The hash of an instance's (sequence, context id), for the store's index of them.
inline std::size_t instance_key_hash(std::string_view sequence, std::string_view context_id) noexcept {
    return pair_hash(sequence, context_id);
}

/// The claim slots by key. Transactions holding or waiting for a key, instance rows, message rows
/// and undo records point to its slot, so a slot keeps its address; one nothing refers to any more
/// is given back (release) and reused for the next new key, so the table holds no more slots than
/// keys in use.
class claim_table {
public:
    using value_type = keyed_slot;

    value_type* find(std::string_view type, std::string_view idempotence_id) {
        const auto position = index_.find(pair_hash(type, idempotence_id), [&](std::uint64_t p) {
            const claim_key& k = slots_[p - 1].first;
            return k.idempotence_id == idempotence_id && k.type == type;
        });
        return position == 0 ? nullptr : &slots_[position - 1];
    }
    value_type* find(const claim_key& key) { return find(key.type, key.idempotence_id); }
    const value_type* find(const claim_key& key) const { return const_cast<claim_table*>(this)->find(key); }

    value_type& find_or_add(std::string_view type, std::string_view idempotence_id) {
        if (auto* slot = find(type, idempotence_id)) return *slot;
        std::size_t position = slots_.size();
        if (free_.empty()) {
            slots_.emplace_back();
        } else {
            position = free_.back();
            free_.pop_back();
        }
        slots_[position].first = {std::string(type), std::string(idempotence_id)};
        index_.insert(pair_hash(type, idempotence_id), position + 1);
        return slots_[position];
    }
    value_type& find_or_add(const claim_key& key) { return find_or_add(key.type, key.idempotence_id); }

    /// Gives `slot` back if nothing refers to it (claim_slot::unused).
    void release_if_unused(value_type& slot) {
        if (!slot.second.unused()) return;
        const auto hash = pair_hash(slot.first.type, slot.first.idempotence_id);
        const auto position = index_.find(hash, [&](std::uint64_t p) { return &slots_[p - 1] == &slot; });
        if (position == 0) return;  // given back already
        index_.erase(hash, position);
        slot = value_type{};
        free_.push_back(position - 1);
    }

    /// Slots in use: what the table holds beyond them is only its free list.
    std::size_t size() const noexcept { return index_.size(); }
    auto begin() const { return slots_.begin(); }
    auto end() const { return slots_.end(); }

private:
    std::deque<value_type> slots_;   // stable addresses
    std::vector<std::size_t> free_;  // positions given back
    hash_index index_;               // key hash -> position + 1
};

/// The instance rows by id. Ids are dense, so a row is found by position, and the table grows
/// by appending (no rehash); a removed row leaves an empty pointer behind.
class instance_table {
public:
    using value_type = std::pair<const instance_id, instance_row>;

    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = instance_table::value_type;
        using difference_type = std::ptrdiff_t;
        using pointer = value_type*;
        using reference = value_type&;

        iterator() = default;
        iterator(const std::deque<std::unique_ptr<value_type>>* rows, std::size_t at) : rows_(rows), at_(at) { skip_empty(); }
        reference operator*() const { return *(*rows_)[at_]; }
        pointer operator->() const { return (*rows_)[at_].get(); }
        iterator& operator++() {
            ++at_;
            skip_empty();
            return *this;
        }
        iterator operator++(int) {
            auto before = *this;
            ++*this;
            return before;
        }
        bool operator==(const iterator& other) const { return at_ == other.at_; }
        std::size_t position() const { return at_; }

    private:
        void skip_empty() {
            while (at_ < rows_->size() && !(*rows_)[at_]) ++at_;
        }
        const std::deque<std::unique_ptr<value_type>>* rows_ = nullptr;
        std::size_t at_ = 0;
    };

    iterator begin() const { return {&rows_, 0}; }
    iterator end() const { return {&rows_, rows_.size()}; }
    /// The first row whose id is above `id`.
    iterator after(instance_id id) const { return {&rows_, std::min(rows_.size(), static_cast<std::size_t>(std::max<instance_id>(id, 0)))}; }
    iterator find(instance_id id) const {
        const auto at = static_cast<std::size_t>(id - 1);
        return id > 0 && at < rows_.size() && rows_[at] ? iterator(&rows_, at) : end();
    }
    bool contains(instance_id id) const { return id == recent_id_ || find(id) != end(); }
    instance_row& at(instance_id id) { return row_at(id); }
    const instance_row& at(instance_id id) const { return row_at(id); }
    /// Row `id` is the one the next lookups will most likely ask for (the instance a delivery
    /// found): they then skip the table's own line for it.
    void note_recent(instance_id id, instance_row& row) const {
        recent_id_ = id;
        recent_row_ = &row;
    }
    /// Ids are handed out in increasing order: `id` is past every row's.
    instance_row& add(instance_id id, instance_row row) {
        rows_.resize(std::max(rows_.size(), static_cast<std::size_t>(id)));
        auto& slot = rows_[static_cast<std::size_t>(id - 1)];
        slot = std::make_unique<value_type>(id, std::move(row));
        note_recent(id, slot->second);
        return slot->second;
    }
    void erase(iterator it) {
        if (it->first == recent_id_) recent_id_ = 0;
        rows_[it.position()].reset();
    }

private:
    instance_row& row_at(instance_id id) const {
        if (id == recent_id_) return *recent_row_;
        auto it = find(id);
        if (it == end()) throw std::out_of_range("no sequence instance " + std::to_string(id));
        note_recent(id, it->second);
        return it->second;
    }
    std::deque<std::unique_ptr<value_type>> rows_;  // instance id N at position N-1
    mutable instance_id recent_id_ = 0;  // 0: none
    mutable instance_row* recent_row_ = nullptr;
};

/// Uncommitted writes of one transaction (claims live in their slots), scanned linearly.
struct overlay {
    std::vector<message_record> messages;  // inserted or updated
    std::vector<std::pair<instance_id, timestamp>> closings;  // instances closed, and when
    std::vector<std::pair<instance_id, std::int64_t>> skips;  // skip_numbers calls
    std::vector<std::pair<std::string, std::string>> kv;
    std::vector<std::pair<instance_id, pending_actions>> cleared_actions;  // clear_actions calls: what was read
};

/// Locks held by one transaction, in acquisition order (so a savepoint can release the tail).
struct held_locks {
    std::vector<keyed_slot*> claims;  // slots are not given back while held
    std::vector<instance_id> instances;
    std::vector<message_id> messages;
    std::vector<claim_key> keys;  // store_message's per-key locks
};

struct savepoint_state {
    overlay writes;
    held_locks locks;
    std::vector<std::optional<claim_row>> claim_views;  // pending row of each held slot
};

struct tx_state {
    std::uint64_t id = 0;
    const task_state* owner = nullptr;  // the driven task that began it, if any
    bool ended = false;
    bool dead = false;  // its connection was lost
    bool loss_seen = false;  // a call on it failed because of that: it ends without a flush
    bool skip_flush = false;  // its commit does not wait for the WAL flush (synchronous_commit off)
    bool flush_owed = false;  // a step beside it committed unflushed: its end flushes
    bool aborted = false;  // a statement failed (53200): nothing but a rollback (to a savepoint) until it ends
    bool lock_fault = false;  // its next savepoint, stored message or commit finds the lock table full
    overlay writes;
    held_locks locks;
    std::vector<savepoint_state> savepoints;
};

template <class Row, class Key, class Project>
Row* find_in(std::vector<Row>& rows, const Key& key, Project project) {
    for (auto& row : rows)
        if (project(row) == key) return &row;
    return nullptr;
}

/// Erases the entry of `key` while it still holds `expected` (an UPDATE ... WHERE it is unchanged);
/// whether it did.
template <class Map>
bool erase_if_equal(Map& rows, const typename Map::key_type& key, const typename Map::mapped_type& expected) {
    auto it = rows.find(key);
    if (it == rows.end() || !(it->second == expected)) return false;
    rows.erase(it);
    return true;
}

/// The value of `key` in `rows`, if it has one.
template <class Map>
std::optional<typename Map::mapped_type> find_value(const Map& rows, const typename Map::key_type& key) {
    auto it = rows.find(key);
    if (it == rows.end()) return std::nullopt;
    return it->second;
}

}  // namespace seqinbox::memory::detail
