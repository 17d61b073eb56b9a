// The in-memory store's transactions and claims (seqinbox::claim_transaction,
// inbox_state_transaction and savepoint_transaction): each operation runs under the store's mutex.
#include <algorithm>
#include <map>
#include <numeric>
#include <span>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store_internals.hpp"

namespace seqinbox::memory {

store::transaction::transaction(store& s, detail::tx_state* tx) : store_(&s), tx_(tx) {}

store::transaction::transaction(transaction&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)), tx_(std::exchange(other.tx_, nullptr)) {}

store::transaction& store::transaction::operator=(transaction&& other) noexcept {
    if (this != &other) {
        abandon();
        store_ = std::exchange(other.store_, nullptr);
        tx_ = std::exchange(other.tx_, nullptr);
    }
    return *this;
}

store::transaction::~transaction() { abandon(); }

std::uint64_t store::transaction::id() const noexcept { return tx_->id; }

bool store::transaction::active() const {
    std::lock_guard lock(store_->mutex_);
    return !tx_->ended;
}

claim_result store::transaction::claim(const claim_request& request) {
    claim_result result;
    result.won = insert_claim(request);
    if (!result.won) return result;
    result.locked = lock_instance(request.instance);
    result.rows = find_messages(request.key);
    return result;
}

std::vector<claim_result> store::transaction::claim_batch(std::span<const claim_request> requests) {
    std::vector<std::size_t> in_key_order(requests.size());
    std::iota(in_key_order.begin(), in_key_order.end(), std::size_t{0});
    std::ranges::sort(in_key_order, {}, [&](std::size_t i) { return requests[i].key; });
    std::vector<claim_result> results(requests.size());
    for (std::size_t i : in_key_order) results[i].won = insert_claim(requests[i]);
    std::map<instance_id, instance_lock> locks;  // ordered: the locks are taken in id order
    for (std::size_t i = 0; i < requests.size(); ++i)
        if (results[i].won) locks.emplace(requests[i].instance, instance_lock{});
    for (auto& [id, lock] : locks) lock = lock_instance(id);
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (!results[i].won) continue;
        results[i].locked = locks.at(requests[i].instance);
        results[i].rows = find_messages(requests[i].key);
    }
    return results;
}

bool store::transaction::insert_claim(const claim_request& request) {
    return run("claim.insert", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        const std::size_t held_before = tx.locks.claims.size();
        detail::claim_slot& slot = s.hold_claim(lock, tx, request.key, "claim.insert");
        if (slot.pending) {
            if (tx.locks.claims.size() > held_before) {  // ON CONFLICT DO NOTHING locks no committed row it meets
                slot.holder = 0;
                slot.pending.reset();
                tx.locks.claims.pop_back();
            }
            return false;
        }
        s.require_instance(request.instance);
        slot.pending = detail::claim_row{request.instance, request.now};
        return true;
    });
}

void store::transaction::delete_claim(const claim_key& key) {
    run("claim.delete", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        // A DELETE neither sees nor waits for another transaction's uncommitted insert.
        const auto* slot = s.claims_.find(key);
        if (slot == nullptr || (!slot->second.committed && slot->second.holder != tx.id)) return;
        s.hold_claim(lock, tx, key, "claim.delete").pending.reset();
    });
}

std::vector<message_record> store::transaction::find_messages(const claim_key& key) {
    return run("message.find", [&](store& s, detail::tx_state& tx, lock_guard&) { return s.visible_messages(tx, key); });
}

instance_lock store::transaction::lock_instance(instance_id instance) {
    sequence_instance row = run("instance.lock", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        s.lock_instance_row(lock, tx, instance, "instance.lock");
        sequence_instance row = s.public_row(s.instances_.at(instance));
        if (detail::find_in(tx.writes.closings, instance, [](auto& p) { return p.first; })) row.state = instance_state::closed;
        return row;
    });
    return {std::move(row), message_types(instance)};
}

types_by_state store::transaction::message_types(instance_id instance) {
    return run("message.types", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        const instance_row& committed = s.instances_.at(instance);
        types_by_state types;
        for (const auto& [type, rows] : committed.types) {
            if (rows.processed + s.own_processed_delta(tx, instance, type) > 0) types.processed.push_back(type);
            // A superset is enough for `waiting`: it only spares the release pass a lookup.
            if (!rows.waiting.empty()) types.waiting.push_back(type);
        }
        for (const auto& own : tx.writes.messages) {  // types only this transaction wrote
            if (own.instance != instance) continue;
            auto& list = own.state == message_state::processed ? types.processed : types.waiting;
            const auto* rows = committed.types.find(own.type);
            const bool committed_too = own.state == message_state::processed && rows != nullptr && rows->processed > 0;
            if (own.state != message_state::failed && !committed_too && std::ranges::find(list, own.type) == list.end())
                list.push_back(own.type);
        }
        return types;
    });
}

std::vector<message_record> store::transaction::waiting_messages(instance_id instance, std::span<const std::string> types) {
    return run("message.waiting", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        const auto& committed = s.instances_.at(instance).types;
        std::vector<message_record> rows;
        for (const auto& type : types) {
            const auto* of_type = committed.find(type);
            if (of_type == nullptr) continue;
            for (message_id id : of_type->waiting)
                if (auto row = s.visible_message(tx, id); row->state == message_state::waiting)
                    rows.push_back(std::move(*row));
        }
        // The transaction's own WAITING rows: new ones, and committed ones it made WAITING (a
        // FAILED row a resend buffered again), which the committed index does not list.
        auto listed = [&](message_id id) { return std::ranges::any_of(rows, [&](const message_record& r) { return r.id == id; }); };
        for (const auto& own : tx.writes.messages)
            if (own.instance == instance && own.state == message_state::waiting && std::ranges::find(types, own.type) != types.end() &&
                !listed(own.id))
                rows.push_back(own);
        std::ranges::sort(rows, {}, &message_record::id);
        return rows;
    });
}

// The committed index's sizes, corrected by this transaction's own rows (whose row ids are
// unique in its writes): flat in the instance's backlog, as the databases' index range counts.
std::size_t store::transaction::count_waiting(instance_id instance, std::size_t up_to) {
    return run("message.count_waiting", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        const auto& committed = s.instances_.at(instance).types;
        std::size_t count = 0;
        for (const auto& [type, of_type] : committed) count += of_type.waiting.size();
        for (const auto& own : tx.writes.messages) {
            if (own.instance != instance) continue;
            const auto* of_type = committed.find(own.type);
            const bool listed = of_type != nullptr && of_type->waiting.contains(own.id);
            const bool waiting = own.state == message_state::waiting;
            if (listed && !waiting) --count;
            if (!listed && waiting) ++count;
        }
        return std::min(count, up_to);
    });
}

// The committed indexes, corrected by this transaction's own rows (as count_waiting): flat in
// the instance's backlog.
std::optional<std::int64_t> store::transaction::last_released_number(instance_id instance) {
    return run("message.last_released_number", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        const instance_row& committed = s.instances_.at(instance);
        std::optional<std::int64_t> last = committed.skipped_through;
        auto raise = [&](std::int64_t n) { last = std::max(last.value_or(n), n); };
        for (const auto& [id, through] : tx.writes.skips)
            if (id == instance) raise(through);
        // A PROCESSED row keeps its state (store_message leaves it), so the committed maximum stands.
        if (!committed.processed_numbers.empty()) raise(committed.processed_numbers.rbegin()->first);
        for (const auto& own : tx.writes.messages)
            if (own.instance == instance && own.state == message_state::processed && own.number) raise(*own.number);
        return last;
    });
}

std::vector<message_record> store::transaction::waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit) {
    return run("message.waiting_numbered", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        const instance_row& committed = s.instances_.at(instance);
        std::vector<message_record> rows;
        // Own rows first: they may come before committed ones, so the committed scan stops at `limit` too.
        for (const auto& own : tx.writes.messages)
            if (own.instance == instance && own.state == message_state::waiting && own.number && *own.number >= from) rows.push_back(own);
        std::size_t taken = 0;
        for (auto it = committed.waiting_numbers.lower_bound({from, 0}); it != committed.waiting_numbers.end() && taken < limit; ++it) {
            auto row = s.visible_message(tx, it->second);
            if (!row || row->state != message_state::waiting) continue;  // this transaction changed it
            if (std::ranges::any_of(rows, [&](const message_record& r) { return r.id == row->id; })) continue;
            rows.push_back(std::move(*row));
            ++taken;
        }
        std::ranges::sort(rows, [](const message_record& a, const message_record& b) { return std::pair(*a.number, a.id) < std::pair(*b.number, b.id); });
        if (rows.size() > limit) rows.resize(limit);
        return rows;
    });
}

void store::transaction::skip_numbers(instance_id instance, std::int64_t through) {
    run("instance.skip_numbers", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        s.lock_instance_row(lock, tx, instance, "instance.skip_numbers");
        tx.writes.skips.emplace_back(instance, through);
    });
}

message_id store::transaction::insert_message(message_record row) {
    return run("message.insert", [&](store& s, detail::tx_state& tx, lock_guard&) { return s.insert_own(tx, std::move(row)); });
}

void store::transaction::update_message_state(message_id id, message_state state, timestamp now) {
    run("message.update", [&](store& s, detail::tx_state& tx, lock_guard& lock) { s.update_own(lock, tx, id, state, now); });
}

stored_as store::transaction::store_message(message_record row) {
    return run("message.store", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        s.fail_if_armed(tx, "storing a sequenced message");
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
            s.update_own(lock, tx, rows.back().id, row.state, row.state_changed_at, std::move(row.payload), row.number);
        }
        return stored_as::updated;
    });
}

void store::transaction::close_instance(instance_id instance, timestamp now) {
    run("instance.close", [&](store& s, detail::tx_state& tx, lock_guard& lock) {
        s.lock_instance_row(lock, tx, instance, "instance.close");
        if (auto* own = detail::find_in(tx.writes.closings, instance, [](auto& p) { return p.first; }))
            own->second = now;
        else
            tx.writes.closings.emplace_back(instance, now);
    });
}

store::savepoint_id store::transaction::savepoint() {
    return run("savepoint", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.fail_if_armed(tx, "creating a savepoint");
        s.take_lock_entry(tx, "creating a savepoint");
        auto& point = tx.savepoints.emplace_back(detail::savepoint_state{tx.writes, tx.locks, {}});
        for (const auto* held : tx.locks.claims) point.claim_views.push_back(held->second.pending);
        return tx.savepoints.size() - 1;
    });
}

void store::transaction::rollback_to(savepoint_id point) {
    run("rollback_to", [&](store& s, detail::tx_state& tx, lock_guard&) {
        if (point >= tx.savepoints.size())
            throw error(error_category::misuse, "no savepoint " + std::to_string(point));
        auto& saved = tx.savepoints[point];
        tx.writes = saved.writes;
        for (std::size_t i = 0; i < saved.claim_views.size(); ++i) tx.locks.claims[i]->second.pending = saved.claim_views[i];
        s.release_locks(tx.locks, saved.locks);
        tx.savepoints.resize(point + 1);
        tx.aborted = false;  // as ROLLBACK TO SAVEPOINT recovers a failed transaction
        s.cv_.notify_all();
    });
}

seqinbox::pending_actions store::transaction::pending_actions(instance_id instance) {
    return run("action.read", [&](store& s, detail::tx_state&, lock_guard&) {
        s.require_instance(instance);
        return s.actions_of(instance);
    });
}

std::vector<message_record> store::transaction::action_targets(instance_id instance, std::span<const message_id> ids) {
    return run("action.targets", [&](store& s, detail::tx_state& tx, lock_guard&) {
        s.require_instance(instance);
        std::vector<message_record> rows;
        for (message_id id : ids) {
            auto row = s.visible_message(tx, id);
            const bool runnable = row && row->instance == instance &&
                                  (row->state == message_state::waiting || (row->state == message_state::failed && row->payload));
            if (runnable) rows.push_back(std::move(*row));
        }
        std::ranges::sort(rows, {}, &message_record::id);
        return rows;
    });
}

void store::transaction::clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
    run("action.clear", [&](store&, detail::tx_state& tx, lock_guard&) { tx.writes.cleared_actions.emplace_back(instance, read); });
}

void store::transaction::put(const std::string& key, const std::string& value) {
    run("kv.put", [&](store&, detail::tx_state& tx, lock_guard&) {
        if (auto* own = detail::find_in(tx.writes.kv, key, [](auto& p) { return p.first; }))
            own->second = value;
        else
            tx.writes.kv.emplace_back(key, value);
    });
}

std::optional<std::string> store::transaction::get(const std::string& key) {
    return run("kv.get", [&](store& s, detail::tx_state& tx, lock_guard&) -> std::optional<std::string> {
        if (auto* own = detail::find_in(tx.writes.kv, key, [](auto& p) { return p.first; })) return own->second;
        auto it = s.kv_.find(key);
        if (it == s.kv_.end()) return std::nullopt;
        return it->second;
    });
}

void store::transaction::commit() {
    if (store_ == nullptr) throw error(error_category::misuse, "use of a moved-from transaction");
    yield_point("commit");
    lock_guard lock(store_->mutex_);
    // A commit whose connection died (unseen yet) still flushes, on another connection.
    store_->settle_flush_owed(*tx_);
    store_->ensure_usable(*tx_);
    if (tx_->aborted) {  // PostgreSQL answers COMMIT with ROLLBACK: nothing is saved
        store_->finish(*tx_);
        throw error(error_category::misuse, "commit after a failed statement: the transaction was rolled back and nothing was saved");
    }
    store_->fail_if_armed(*tx_, "committing");
    store_->commit_durably(*tx_);
    store_->finish(*tx_);
}

void store::transaction::rollback() {
    if (store_ == nullptr) return;
    yield_point("rollback");
    end_quietly();
}

void store::transaction::end_quietly() noexcept {
    std::lock_guard lock(store_->mutex_);
    store_->settle_flush_owed(*tx_);
    if (!tx_->ended) store_->finish(*tx_);
}

void store::transaction::abandon() noexcept {
    if (store_ == nullptr) return;
    std::lock_guard lock(store_->mutex_);
    store_->settle_flush_owed(*tx_);
    if (!tx_->ended) store_->finish(*tx_);
    store_->free_.push_back(tx_);
    store_ = nullptr;
}

}  // namespace seqinbox::memory
