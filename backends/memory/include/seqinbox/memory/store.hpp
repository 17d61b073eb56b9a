#pragma once
// The in-memory store: the semantics of the PostgreSQL schema (see seqinbox/store/concept.hpp)
// without a database. Transactions see committed rows plus their own writes; a claim insert waits
// while another open transaction holds the key; instance locks are row locks held to the end of
// the transaction; deleting an instance cascades. Thread-safe: any number of threads may run
// transactions at once. Driven tasks (step_driver) park before every operation.
//
// Durability is modelled as the PostgreSQL store has it (see testing::crash in memory/testing.hpp):
// the WAL is durable as a prefix. A commit that wrote something waits for its flush, which covers all
// earlier commits; an instance creation and a state step beside a claim transaction do not wait,
// and the claim transaction's end flushes them (its commit, or an explicit flush when it wrote
// nothing or rolled back, unless a statement found its connection lost). A crash keeps what was
// flushed and any prefix of the later commits.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/memory/detail/tables.hpp"
#include "seqinbox/memory/detail/task_hook.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/views.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::memory {

struct store_options {
    /// How long a free (non-driven) thread waits for a lock before failing with a retryable
    /// error, like PostgreSQL's lock_timeout. Driven tasks wait for as long as the test wants.
    std::chrono::milliseconds lock_timeout{30'000};
};

class store {
    using instance_row = detail::instance_row;

public:
    class transaction;
    using savepoint_id = std::size_t;

    explicit store(store_options options = {}) : options_(options) {}
    store(const store&) = delete;
    store& operator=(const store&) = delete;

    // ---- transactions and claims (here, and the transaction class below) ----
    transaction begin();

    sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                             timestamp created_at, timestamp retain_until) {
        yield_point("instance.create_or_get");
        std::lock_guard lock(mutex_);
        auto& by_context = instance_index_[sequence];
        if (auto it = by_context.find(context_id); it != by_context.end()) return instances_.at(it->second).row;
        unflushed_commit();  // a creation does not wait for its WAL flush (synchronous_commit off)
        const instance_id id = next_instance_id_++;
        by_context.emplace(context_id, id);
        instance_row row;
        row.row = {id, sequence, context_id, instance_state::open, created_at, retain_until, {}};
        return instances_.emplace(id, std::move(row)).first->second.row;
    }

    /// Remembers nothing outside the store's state: there is nothing to forget.
    void forget_instance(instance_id) noexcept {}

    /// transaction::store_message in a transaction of its own.
    stored_as store_message(message_record row);
    /// store_message without waiting for the WAL flush: `claim` owes the flush when it ends.
    stored_as store_message_beside(transaction& claim, message_record row);

    // ---- operator actions (seqinbox::action_store; detail/actions.hpp) ----
    // Committed at once, like an UPDATE.
    bool request_message_action(message_id id, message_action action, timestamp now);
    bool request_instance_action(instance_id id, instance_action action, timestamp now);
    std::vector<instance_id> instances_with_pending_actions(std::size_t limit) const;

    // ---- housekeeping (seqinbox::housekeeping_store; detail/housekeeping.hpp) ----
    /// Exclusion of one job between the users of this store; released when destroyed.
    class job_lock;
    job_lock try_lock_job(const std::string& job);
    std::vector<instance_id> closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit) const;
    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit) const;
    /// Instances locked by a transaction are skipped, as UPDATE ... SKIP LOCKED does.
    std::vector<sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit);
    bool remove_instance(instance_id id, const forward_waiting& forward);

    // ---- read views (seqinbox::view_store; detail/views.hpp) ----
    std::vector<instance_count> instance_counts() const;
    std::vector<message_count> message_counts() const;
    std::vector<retention_count> retention_counts(timestamp now, double share) const;
    std::vector<sequence_instance> expired_instances(timestamp now, std::size_t limit) const;
    std::vector<sequence_instance> expiring_instances(timestamp now, double share, std::size_t limit) const;
    std::optional<instance_view> view_instance(const std::string& sequence, const std::string& context_id) const;

    // ---- inspection of committed state (tests, demo, operators; detail/views.hpp) ----
    std::vector<sequence_instance> instances() const;
    std::optional<sequence_instance> find_instance(const std::string& sequence, const std::string& context_id) const;
    std::vector<message_record> messages() const;
    std::vector<message_record> messages_with_key(const claim_key& key) const;
    bool has_claim(const claim_key& key) const;
    std::size_t claim_count() const;
    std::size_t open_transaction_count() const;

private:
    friend class transaction;
    friend struct testing;  // the test hooks (memory/testing.hpp)
    using lock_guard = std::unique_lock<std::mutex>;

    void ensure_usable(detail::tx_state& tx) {
        if (tx.dead) {
            tx.loss_seen = true;
            throw error(error_category::connection,
                        "connection lost: transaction " + std::to_string(tx.id) + " was rolled back", "57P01");
        }
        if (tx.ended) throw error(error_category::misuse, "transaction " + std::to_string(tx.id) + " already ended");
    }

    /// Parks (driven task) or waits (free thread) while `conflict()` holds; rechecks liveness.
    template <class Conflict>
    void wait_while(lock_guard& lock, detail::tx_state* tx, std::string_view label, Conflict conflict) {
        const auto deadline = std::chrono::steady_clock::now() + options_.lock_timeout;
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

    /// Runs one operation of `tx`: parks a driven task first, then holds the store mutex.
    template <class Op>
    auto operate(detail::tx_state& tx, std::string_view label, Op op) {
        yield_point(label);
        lock_guard lock(mutex_);
        ensure_usable(tx);
        return op(lock);
    }

    template <class Id, class... Hash>
    static bool held_by_other(const std::unordered_map<Id, std::uint64_t, Hash...>& locks, const Id& id, const detail::tx_state& tx) {
        auto it = locks.find(id);
        return it != locks.end() && it->second != tx.id;
    }

    void require_instance(instance_id id) const {
        if (!instances_.contains(id))
            throw error(error_category::retryable,
                        "sequence instance " + std::to_string(id) + " no longer exists (removed by housekeeping?)",
                        std::string(instance_removed_sqlstate));
    }

    // ---- visibility: committed rows overlaid with the transaction's own writes ----
    static const std::optional<detail::claim_row>& visible_claim(const detail::tx_state& tx, const detail::claim_slot& slot) {
        return slot.holder == tx.id ? slot.pending : slot.committed;
    }

    std::optional<message_record> visible_message(detail::tx_state& tx, message_id id) const {
        if (auto* own = detail::find_in(tx.writes.messages, id, [](auto& r) { return r.id; })) return *own;
        const auto* row = committed_message(id);
        if (row == nullptr) return std::nullopt;
        return row->record(id);
    }

    template <class Self>
    static auto* committed_in(Self& self, message_id id) {
        auto index = static_cast<std::size_t>(id - 1);
        auto& rows = self.messages_;
        return id > 0 && index < rows.size() && rows[index].exists ? &rows[index] : nullptr;
    }
    detail::stored_message* committed_message(message_id id) { return committed_in(*this, id); }
    const detail::stored_message* committed_message(message_id id) const { return committed_in(*this, id); }

    /// Calls `visit(id, row)` for every committed message with `key` (several in old databases).
    template <class Visit>
    void for_each_committed(const claim_key& key, Visit visit) const {
        auto [first, last] = messages_by_key_.equal_range(detail::claim_key_hash{}(key));
        for (auto it = first; it != last; ++it)
            if (const auto& row = *committed_message(it->second); row.has_key(key)) visit(it->second, row);
    }

    /// How the transaction's own writes change the number of PROCESSED rows of `type`.
    int own_processed_delta(const detail::tx_state& tx, instance_id instance, const std::string& type) const {
        int delta = 0;
        for (const auto& own : tx.writes.messages) {
            if (own.instance != instance || own.type != type) continue;
            const auto* before = committed_message(own.id);
            if (before != nullptr && before->state == message_state::processed) --delta;
            if (own.state == message_state::processed) ++delta;
        }
        return delta;
    }

    // ---- locks ----
    /// Takes the key's slot for `tx`, waiting while another transaction holds it.
    detail::claim_slot& hold_claim(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label) {
        auto& held = *claims_.try_emplace(key).first;  // node-based: the reference survives rehashing
        detail::claim_slot& slot = held.second;
        wait_while(lock, &tx, label, [&] { return slot.holder != 0 && slot.holder != tx.id; });
        if (slot.holder != tx.id) {
            slot.holder = tx.id;
            slot.pending = slot.committed;
            tx.locks.claims.push_back(&held);
        }
        return slot;
    }
    void lock_instance_row(lock_guard& lock, detail::tx_state& tx, instance_id id, std::string_view label) {
        wait_while(lock, &tx, label, [&] { return held_by_other(instance_locks_, id, tx); });
        require_instance(id);
        if (instance_locks_.try_emplace(id, tx.id).second) tx.locks.instances.push_back(id);
    }
    /// store_message's per-key lock, like pg_advisory_xact_lock on the key.
    void lock_key(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label) {
        wait_while(lock, &tx, label, [&] { return held_by_other(key_locks_, key, tx); });
        if (key_locks_.try_emplace(key, tx.id).second) tx.locks.keys.push_back(key);
    }

    /// The rows with `key` that `tx` sees, oldest first.
    std::vector<message_record> visible_messages(detail::tx_state& tx, const claim_key& key) const {
        std::vector<message_record> rows;
        for_each_committed(key, [&](message_id id, const auto&) { rows.push_back(*visible_message(tx, id)); });
        for (const auto& own : tx.writes.messages)
            if (own.key() == key && !committed_message(own.id)) rows.push_back(own);
        std::ranges::sort(rows, {}, &message_record::id);
        return rows;
    }

    message_id insert_own(detail::tx_state& tx, message_record row) {
        require_instance(row.instance);
        row.id = next_message_id_++;
        tx.writes.messages.push_back(std::move(row));
        message_locks_.emplace(tx.writes.messages.back().id, tx.id);
        tx.locks.messages.push_back(tx.writes.messages.back().id);
        return tx.writes.messages.back().id;
    }

    /// Changes the state of row `id` (and its payload when `payload` has one) as an UPDATE does:
    /// a row deleted meanwhile (housekeeping removed its instance while a state step ran beside
    /// a claim transaction that had lost its connection) is left alone, as PostgreSQL does.
    void update_own(lock_guard& lock, detail::tx_state& tx, message_id id, message_state state, timestamp now,
                    std::optional<envelope> payload = std::nullopt) {
        wait_while(lock, &tx, "message.update", [&] { return held_by_other(message_locks_, id, tx); });
        auto row = visible_message(tx, id);
        if (!row) return;
        if (message_locks_.try_emplace(id, tx.id).second) tx.locks.messages.push_back(id);
        row->state = state;
        row->state_changed_at = now;
        if (payload) row->payload = std::move(payload);
        if (auto* own = detail::find_in(tx.writes.messages, id, [](auto& r) { return r.id; }))
            *own = std::move(*row);
        else
            tx.writes.messages.push_back(std::move(*row));
    }
    /// Releases the locks taken after `kept` (a savepoint's locks, or none at all).
    void release_locks(detail::held_locks& locks, const detail::held_locks& kept) {
        for (std::size_t i = kept.claims.size(); i < locks.claims.size(); ++i) {
            locks.claims[i]->second.holder = 0;
            locks.claims[i]->second.pending.reset();
        }
        for (std::size_t i = kept.instances.size(); i < locks.instances.size(); ++i) instance_locks_.erase(locks.instances[i]);
        for (std::size_t i = kept.messages.size(); i < locks.messages.size(); ++i) message_locks_.erase(locks.messages[i]);
        for (std::size_t i = kept.keys.size(); i < locks.keys.size(); ++i) key_locks_.erase(locks.keys[i]);
        locks.claims.resize(kept.claims.size());
        locks.instances.resize(kept.instances.size());
        locks.messages.resize(kept.messages.size());
        locks.keys.resize(kept.keys.size());
    }

    void finish(detail::tx_state& tx) {
        release_locks(tx.locks, {});
        tx.writes.messages.clear();
        tx.writes.closings.clear();
        tx.writes.kv.clear();
        tx.writes.cleared_actions.clear();
        tx.savepoints.clear();
        tx.ended = true;
        std::erase(open_, &tx);
        cv_.notify_all();
    }
    void kill(detail::tx_state& tx) {
        tx.dead = true;
        finish(tx);
    }

    bool referenced(instance_id id) const;  // by a lock or an uncommitted write: a DELETE would wait

    // ---- durability (see testing::crash) ----
    /// The committed tables and id sequences before an unflushed commit: what a crash that loses
    /// that commit restores. Test states are small, so a copy per unflushed commit will do.
    struct committed_tables {
        instance_id next_instance_id;
        message_id next_message_id;
        std::unordered_map<instance_id, instance_row> instances;
        std::unordered_map<std::string, std::unordered_map<std::string, instance_id>> instance_index;
        std::deque<detail::stored_message> messages;
        std::unordered_multimap<std::size_t, message_id> messages_by_key;
        std::vector<std::pair<claim_key, detail::claim_row>> claims;
        std::map<std::string, std::string> kv;
        std::map<message_id, message_request> message_actions;
        std::map<instance_id, instance_request> instance_actions;
    };
    /// Called before a commit that does not wait for its flush is applied.
    void unflushed_commit() { unflushed_.push_back(committed()); }
    /// A flush: every commit so far is durable.
    void flush_wal() { unflushed_.clear(); }
    /// Applies `tx` as a commit does: one that wrote anything waits for its flush unless it skips
    /// it; one that wrote nothing waits for none, but flushes what it owes its steps beside.
    void commit_durably(detail::tx_state& tx);
    /// An ending claim transaction flushes its steps beside, unless a statement found it lost.
    void settle_flush_owed(detail::tx_state& tx) {
        if (std::exchange(tx.flush_owed, false) && !tx.loss_seen) flush_wal();
    }
    static bool writes_anything(const detail::tx_state& tx) {
        const auto& w = tx.writes;
        // A row lock (FOR NO KEY UPDATE) writes WAL too.
        return !w.messages.empty() || !w.closings.empty() || !w.kv.empty() || !w.cleared_actions.empty() ||
               !tx.locks.instances.empty() ||
               std::ranges::any_of(tx.locks.claims, [](const auto* held) { return held->second.pending.has_value() != held->second.committed.has_value(); });
    }
    committed_tables committed() const;
    void restore(committed_tables&& saved);
    // Helpers of the other concepts (detail/actions.hpp, detail/views.hpp, detail/housekeeping.hpp).
    pending_actions actions_of(instance_id instance) const;
    /// How much of its retention the instance has used at `now` (1 and more: expired).
    static double used_share(const sequence_instance& i, timestamp now);
    std::vector<sequence_instance> rows_of(const std::vector<instance_id>& ids) const;
    /// The cascade of deleting an instance, with its messages, claims and requests.
    void erase_instance(std::unordered_map<instance_id, instance_row>::iterator it);

    /// Ids of up to `limit` instances matching `pick`, ordered by `order_by`; the mutex is held.
    template <class Pick, class OrderBy>
    std::vector<instance_id> instances_where_locked(std::size_t limit, Pick pick, OrderBy order_by) const {
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
    std::vector<instance_id> instances_where(std::size_t limit, Pick pick, OrderBy order_by) const {
        std::lock_guard lock(mutex_);
        return instances_where_locked(limit, pick, order_by);
    }

    void apply(detail::tx_state& tx);
    void apply_message(message_record&& row);
    void forget_message_indexes(message_id id, const detail::stored_message& row);

    store_options options_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    instance_id next_instance_id_ = 1;
    message_id next_message_id_ = 1;
    std::uint64_t next_tx_ = 1;

    std::unordered_map<instance_id, instance_row> instances_;
    std::unordered_map<std::string, std::unordered_map<std::string, instance_id>> instance_index_;  // sequence, context
    std::deque<detail::stored_message> messages_;  // message id N at index N-1; ids are dense
    std::unordered_multimap<std::size_t, message_id> messages_by_key_;  // by claim key hash: non-unique
    std::unordered_map<claim_key, detail::claim_slot, detail::claim_key_hash> claims_;
    std::map<std::string, std::string> kv_;

    std::unordered_map<instance_id, std::uint64_t> instance_locks_;
    std::unordered_map<message_id, std::uint64_t> message_locks_;
    std::unordered_map<claim_key, std::uint64_t, detail::claim_key_hash> key_locks_;
    std::map<message_id, message_request> message_actions_;
    std::map<instance_id, instance_request> instance_actions_;
    std::set<std::string> running_jobs_;
    std::vector<detail::tx_state*> open_;
    std::vector<std::unique_ptr<detail::tx_state>> pool_;  // transactions must not outlive the store
    std::vector<detail::tx_state*> free_;
    std::vector<committed_tables> unflushed_;  // the state before each commit not flushed yet
};

/// One transaction on its own "connection". Move-only; rolls back when destroyed unactive.
/// Not thread-safe: one thread uses a transaction at a time.
class store::transaction {
    // Defined first: the operations below deduce their return types from it.
    template <class Op>
    auto run(std::string_view label, Op op) {
        if (store_ == nullptr) throw error(error_category::misuse, "use of a moved-from transaction");
        return store_->operate(*tx_, label, [&](lock_guard& lock) { return op(*store_, *tx_, lock); });
    }

public:
    transaction(transaction&& other) noexcept
        : store_(std::exchange(other.store_, nullptr)), tx_(std::exchange(other.tx_, nullptr)) {}
    transaction& operator=(transaction&& other) noexcept {
        if (this != &other) {
            abandon();
            store_ = std::exchange(other.store_, nullptr);
            tx_ = std::exchange(other.tx_, nullptr);
        }
        return *this;
    }
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    ~transaction() { abandon(); }

    std::uint64_t id() const noexcept { return tx_->id; }
    /// True until commit, rollback or a lost connection.
    bool active() const {
        std::lock_guard lock(store_->mutex_);
        return !tx_->ended;
    }

    /// Three steps, each a point where a driven task parks: the claim insert, the instance lock
    /// (itself two: the lock, then the types) and the key's rows.
    claim_result claim(const claim_request& request) {
        claim_result result;
        result.won = insert_claim(request);
        if (!result.won) return result;
        result.locked = lock_instance(request.instance);
        result.rows = find_messages(request.key);
        return result;
    }

    void delete_claim(const claim_key& key) {
        run("claim.delete", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
            // A DELETE neither sees nor waits for another transaction's uncommitted insert.
            auto it = s.claims_.find(key);
            if (it == s.claims_.end() || (!it->second.committed && it->second.holder != tx.id)) return;
            s.hold_claim(lock, tx, key, "claim.delete").pending.reset();
        });
    }

    std::vector<message_record> find_messages(const claim_key& key) {
        return run("message.find", [&](store& s, detail::tx_state& tx, lock_guard&) { return s.visible_messages(tx, key); });
    }

    instance_lock lock_instance(instance_id instance) {
        sequence_instance row = run("instance.lock", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
            s.lock_instance_row(lock, tx, instance, "instance.lock");
            sequence_instance row = s.instances_.at(instance).row;
            if (detail::find_in(tx.writes.closings, instance, [](auto& p) { return p.first; })) row.state = instance_state::closed;
            return row;
        });
        return {std::move(row), message_types(instance)};
    }

    /// The instance's types as lock_instance reads them, without the lock (tests of visibility).
    types_by_state message_types(instance_id instance) {
        return run("message.types", [&](store& s, detail::tx_state& tx, lock_guard&) {
            s.require_instance(instance);
            const instance_row& committed = s.instances_.at(instance);
            types_by_state types;
            for (const auto& [type, count] : committed.processed)
                if (count + s.own_processed_delta(tx, instance, type) > 0) types.processed.push_back(type);
            // A superset is enough for `waiting`: it only spares the release pass a lookup.
            for (const auto& [type, ids] : committed.waiting)
                if (!ids.empty()) types.waiting.push_back(type);
            for (const auto& own : tx.writes.messages) {  // types only this transaction wrote
                if (own.instance != instance) continue;
                auto& list = own.state == message_state::processed ? types.processed : types.waiting;
                const bool committed_too = own.state == message_state::processed && committed.processed.find(own.type);
                if (own.state != message_state::failed && !committed_too && std::ranges::find(list, own.type) == list.end())
                    list.push_back(own.type);
            }
            return types;
        });
    }

    std::vector<message_record> waiting_messages(instance_id instance, std::span<const std::string> types) {
        return run("message.waiting", [&](store& s, detail::tx_state& tx, lock_guard&) {
            s.require_instance(instance);
            const auto& waiting = s.instances_.at(instance).waiting;
            std::vector<message_record> rows;
            for (const auto& type : types) {
                const auto* ids = waiting.find(type);
                if (ids == nullptr) continue;
                for (message_id id : *ids)
                    if (auto row = s.visible_message(tx, id); row->state == message_state::waiting)
                        rows.push_back(std::move(*row));
            }
            for (const auto& own : tx.writes.messages)
                if (own.instance == instance && own.state == message_state::waiting && !s.committed_message(own.id) &&
                    std::ranges::find(types, own.type) != types.end())
                    rows.push_back(own);
            std::ranges::sort(rows, {}, &message_record::id);
            return rows;
        });
    }

    /// Test support, not the store contract: inserts `row` as it is and returns its id.
    message_id insert_message(message_record row) {
        return run("message.insert", [&](store& s, detail::tx_state& tx, lock_guard&) { return s.insert_own(tx, std::move(row)); });
    }

    void update_message_state(message_id id, message_state state, timestamp now) {
        run("message.update", [&](store& s, detail::tx_state& tx, lock_guard& lock) { s.update_own(lock, tx, id, state, now); });
    }

    stored_as store_message(message_record row) {
        return run("message.store", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
            s.lock_key(lock, tx, row.key(), "message.store");
            const auto rows = s.visible_messages(tx, row.key());
            auto in = [&](message_state state) { return std::ranges::any_of(rows, [&](auto& r) { return r.state == state; }); };
            if (rows.empty()) {
                s.insert_own(tx, std::move(row));
                return stored_as::inserted;
            }
            if (in(message_state::processed) || (in(message_state::waiting) && row.state != message_state::processed))
                return stored_as::left_existing;
            if (in(message_state::waiting)) {
                for (const auto& r : rows)
                    if (r.state == message_state::waiting) s.update_own(lock, tx, r.id, row.state, row.state_changed_at);
            } else {
                s.update_own(lock, tx, rows.back().id, row.state, row.state_changed_at, std::move(row.payload));
            }
            return stored_as::updated;
        });
    }

    void close_instance(instance_id instance, timestamp now) {
        run("instance.close", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
            s.lock_instance_row(lock, tx, instance, "instance.close");
            if (auto* own = detail::find_in(tx.writes.closings, instance, [](auto& p) { return p.first; }))
                own->second = now;
            else
                tx.writes.closings.emplace_back(instance, now);
        });
    }

    savepoint_id savepoint() {
        return run("savepoint", [&](store&, detail::tx_state& tx, lock_guard&) {
            auto& point = tx.savepoints.emplace_back(detail::savepoint_state{tx.writes, tx.locks, {}});
            for (const auto* held : tx.locks.claims) point.claim_views.push_back(held->second.pending);
            return tx.savepoints.size() - 1;
        });
    }

    void rollback_to(savepoint_id point) {
        run("rollback_to", [&](store& s, detail::tx_state& tx, lock_guard&) {
            if (point >= tx.savepoints.size())
                throw error(error_category::misuse, "no savepoint " + std::to_string(point));
            auto& saved = tx.savepoints[point];
            tx.writes = saved.writes;
            for (std::size_t i = 0; i < saved.claim_views.size(); ++i) tx.locks.claims[i]->second.pending = saved.claim_views[i];
            s.release_locks(tx.locks, saved.locks);
            tx.savepoints.resize(point + 1);
            s.cv_.notify_all();
        });
    }

    seqinbox::pending_actions pending_actions(instance_id instance) {
        return run("action.read", [&](store& s, detail::tx_state&, lock_guard&) {
            s.require_instance(instance);
            return s.actions_of(instance);
        });
    }

    void clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
        run("action.clear", [&](store&, detail::tx_state& tx, lock_guard&) { tx.writes.cleared_actions.emplace_back(instance, read); });
    }

    /// A business key-value table beside the inbox tables, so that tests can show a listener
    /// committing atomically with the inbox state (propagation::required).
    void put(const std::string& key, const std::string& value) {
        run("kv.put", [&](store&, detail::tx_state& tx, lock_guard&) {
            if (auto* own = detail::find_in(tx.writes.kv, key, [](auto& p) { return p.first; }))
                own->second = value;
            else
                tx.writes.kv.emplace_back(key, value);
        });
    }
    std::optional<std::string> get(const std::string& key) {
        return run("kv.get", [&](store& s, detail::tx_state& tx, lock_guard&) -> std::optional<std::string> {
            if (auto* own = detail::find_in(tx.writes.kv, key, [](auto& p) { return p.first; })) return own->second;
            auto it = s.kv_.find(key);
            if (it == s.kv_.end()) return std::nullopt;
            return it->second;
        });
    }

    /// Makes the writes visible and releases the locks; throws (connection) if it was lost.
    void commit() {
        if (store_ == nullptr) throw error(error_category::misuse, "use of a moved-from transaction");
        yield_point("commit");
        lock_guard lock(store_->mutex_);
        // A commit whose connection died (unseen yet) still flushes, on another connection.
        store_->settle_flush_owed(*tx_);
        store_->ensure_usable(*tx_);
        store_->commit_durably(*tx_);
        store_->finish(*tx_);
    }

    /// Discards the writes; a no-op on an ended transaction.
    void rollback() {
        if (store_ == nullptr) return;
        yield_point("rollback");
        end_quietly();
    }

private:
    friend class store;
    transaction(store& s, detail::tx_state* tx) : store_(&s), tx_(tx) {}

    bool insert_claim(const claim_request& request) {
        return run("claim.insert", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
            detail::claim_slot& slot = s.hold_claim(lock, tx, request.key, "claim.insert");
            if (slot.pending) return false;
            s.require_instance(request.instance);
            slot.pending = detail::claim_row{request.instance, request.now};
            return true;
        });
    }

    void end_quietly() noexcept {
        std::lock_guard lock(store_->mutex_);
        store_->settle_flush_owed(*tx_);
        if (!tx_->ended) store_->finish(*tx_);
    }
    void abandon() noexcept {
        if (store_ == nullptr) return;
        std::lock_guard lock(store_->mutex_);
        store_->settle_flush_owed(*tx_);
        if (!tx_->ended) store_->finish(*tx_);
        store_->free_.push_back(tx_);
        store_ = nullptr;
    }

    store* store_;
    detail::tx_state* tx_;  // owned by the store's pool; returned there when this object dies
};

inline store::transaction store::begin() {
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
    open_.push_back(tx);
    return transaction(*this, tx);
}

inline stored_as store::store_message(message_record row) {
    auto tx = begin();
    const stored_as what = tx.store_message(std::move(row));
    tx.commit();
    return what;
}

inline stored_as store::store_message_beside(transaction& claim, message_record row) {
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

inline void store::commit_durably(detail::tx_state& tx) {
    const bool writes = writes_anything(tx);
    if (writes && tx.skip_flush) unflushed_commit();
    apply(tx);
    if (writes && !tx.skip_flush) flush_wal();  // covers every earlier commit
    settle_flush_owed(tx);
}

inline store::committed_tables store::committed() const {
    committed_tables saved{next_instance_id_, next_message_id_, instances_, instance_index_, messages_, messages_by_key_,
                           {}, kv_, message_actions_, instance_actions_};
    for (const auto& [key, slot] : claims_)
        if (slot.committed) saved.claims.emplace_back(key, *slot.committed);
    return saved;
}

/// Every transaction has ended: no lock refers to a claim slot, which are kept (see erase_instance).
inline void store::restore(committed_tables&& saved) {
    next_instance_id_ = saved.next_instance_id;
    next_message_id_ = saved.next_message_id;
    instances_ = std::move(saved.instances);
    instance_index_ = std::move(saved.instance_index);
    messages_ = std::move(saved.messages);
    messages_by_key_ = std::move(saved.messages_by_key);
    for (auto& [key, slot] : claims_) slot.committed.reset();
    for (auto& [key, row] : saved.claims) claims_[key].committed = row;
    kv_ = std::move(saved.kv);
    message_actions_ = std::move(saved.message_actions);
    instance_actions_ = std::move(saved.instance_actions);
}

inline void store::forget_message_indexes(message_id id, const detail::stored_message& row) {
    auto& instance = instances_.at(row.instance);
    if (row.state == message_state::processed) --instance.processed[row.type];
    if (row.state == message_state::waiting) instance.waiting[row.type].erase(id);
}

inline void store::apply_message(message_record&& row) {
    const message_id id = row.id;
    auto* existing = committed_message(id);
    if (existing != nullptr) forget_message_indexes(id, *existing);
    auto& instance = instances_.at(row.instance);
    if (row.state == message_state::processed) ++instance.processed[row.type];
    if (row.state == message_state::waiting) instance.waiting[row.type].insert(id);
    if (existing != nullptr) {
        *existing = detail::stored_message(std::move(row), existing->key_hash);
        return;
    }
    const std::size_t hash = detail::claim_key_hash{}(claim_key{row.type, row.idempotence_id});
    messages_by_key_.emplace(hash, id);
    instance.messages.push_back(id);
    if (messages_.size() < static_cast<std::size_t>(id)) messages_.resize(static_cast<std::size_t>(id));
    messages_[static_cast<std::size_t>(id) - 1] = detail::stored_message(std::move(row), hash);
}

inline void store::apply(detail::tx_state& tx) {
    for (auto* held : tx.locks.claims) {
        auto& slot = held->second;
        if (slot.pending && !slot.committed) instances_.at(slot.pending->instance).claims.push_back(held->first);
        slot.committed = slot.pending;
    }
    for (auto& row : tx.writes.messages) apply_message(std::move(row));
    for (const auto& [id, at] : tx.writes.closings) {
        instances_.at(id).row.state = instance_state::closed;
        instances_.at(id).closed_at = at;
    }
    for (auto& [key, value] : tx.writes.kv) kv_.insert_or_assign(key, value);
    for (const auto& [instance, read] : tx.writes.cleared_actions) {  // a request replaced since stays
        if (read.on_instance) detail::erase_if_equal(instance_actions_, instance, *read.on_instance);
        for (const auto& request : read.on_messages) detail::erase_if_equal(message_actions_, request.message, request);
    }
}

}  // namespace seqinbox::memory

namespace seqinbox::memory {
static_assert(seqinbox::store_policy<store>, "memory::store must model seqinbox::store_policy");
}  // namespace seqinbox::memory

// The store's other concepts, defined out of the class; each part checks its concept at its end
// (a part included first reaches here before its own definitions).
#include "seqinbox/memory/detail/actions.hpp"
#include "seqinbox/memory/detail/housekeeping.hpp"
#include "seqinbox/memory/detail/views.hpp"
