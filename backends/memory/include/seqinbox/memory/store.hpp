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
// flushed and any prefix of the later commits: each unflushed commit records what it replaced
// (an undo record, src/durability.cpp), so the model costs what a commit changed.
//
// PostgreSQL's lock table is modelled as one transaction's share of it (store_options::
// lock_entries): a transaction that goes over it fails with SQLSTATE 53200 and is aborted.
//
// Only declarations live here, so that a unit using the store does not compile it: the bodies are
// compiled once into seqinbox::memory, one file per concept of store/ (backends/memory/src/).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

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
    /// How long an operator action request waits for its row (held by a delivery in progress)
    /// before it fails with request_locked (seqinbox/store/actions.hpp), as the PostgreSQL
    /// store's request_lock_timeout.
    std::chrono::milliseconds request_lock_timeout{2'000};
    /// PostgreSQL's shared lock table, as the share one transaction may fill (0: no limit). A
    /// message key store_message locks takes an entry (its advisory lock), so does a savepoint
    /// (its subtransaction) until rolled back; the operation that would take one more fails with
    /// error(retryable, "out of shared memory ...", "53200") and aborts the transaction: later
    /// statements fail (25P02) until it rolls back, or back to a savepoint, as there.
    std::size_t lock_entries = 0;
    /// What max_batch_records() reports (0: no limit): the records one batch transaction may
    /// decide when listeners do not join it; half as many (at least 1) when they do, as each
    /// then takes a savepoint too. What lock_entries holds beyond that is left to what a batch
    /// takes besides its records (release passes' and later rounds' savepoints), as the
    /// PostgreSQL store leaves the rest of the table.
    std::size_t max_batch_records = 0;
};

class store {
    using instance_row = detail::instance_row;

public:
    class transaction;
    using savepoint_id = std::size_t;

    explicit store(store_options options = {});
    ~store();
    store(const store&) = delete;
    store& operator=(const store&) = delete;

    // ---- transactions and claims (src/store.cpp, src/transaction.cpp) ----
    transaction begin();

    sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                             timestamp created_at, timestamp retain_until);

    /// Remembers nothing outside the store's state: there is nothing to forget.
    void forget_instance(instance_id) noexcept {}

    /// How many records one batch transaction may decide (store_options::max_batch_records);
    /// the largest size_t without a limit.
    std::size_t max_batch_records(bool listeners_join) const noexcept;

    /// transaction::store_message in a transaction of its own.
    stored_as store_message(message_record row);
    /// store_message without waiting for the WAL flush: `claim` owes the flush when it ends.
    stored_as store_message_beside(transaction& claim, message_record row);

    // ---- operator actions (seqinbox::action_store; src/actions.cpp) ----
    // Committed at once, like an UPDATE; a row locked longer than request_lock_timeout fails
    // them with request_locked.
    request_outcome request_message_action(message_id id, message_action action, timestamp now);
    request_outcome request_instance_action(instance_id id, instance_action action, timestamp now);
    std::vector<instance_id> instances_with_pending_actions(std::size_t limit) const;

    // ---- housekeeping (seqinbox::housekeeping_store; src/housekeeping.cpp) ----
    /// Exclusion of one job between the users of this store; released when destroyed.
    class job_lock;
    job_lock try_lock_job(const std::string& job);
    std::vector<instance_id> closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                              scan_position& after) const;
    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit, scan_position& after) const;
    std::vector<instance_id> stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after) const;
    /// Instances locked by a transaction are skipped, as UPDATE ... SKIP LOCKED does.
    std::vector<sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after);
    std::size_t remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward);
    /// remove_instances of one: whether it was deleted.
    bool remove_instance(instance_id id, const removal_condition& condition, const forward_waiting& forward) {
        return remove_instances({&id, 1}, condition, forward) == 1;
    }

    // ---- read views (seqinbox::view_store; src/views.cpp) ----
    std::vector<instance_count> instance_counts() const;
    std::vector<message_count> message_counts() const;
    std::vector<retention_count> retention_counts(timestamp now, double share) const;
    std::vector<sequence_instance> expired_instances(timestamp now, std::size_t limit, const scan_position& after = {}) const;
    std::vector<sequence_instance> expiring_instances(timestamp now, double share, std::size_t limit,
                                                      const scan_position& after = {}) const;
    std::vector<waiting_instance> waiting_longest(std::size_t limit) const;
    std::optional<instance_view> view_instance(const std::string& sequence, const std::string& context_id,
                                               const message_page& page = {}) const;
    std::optional<instance_view> view_instance(instance_id id, const message_page& page = {}) const;
    std::optional<message_view> find_message(message_id id) const;
    std::optional<message_view> find_message(const claim_key& key) const;

    // ---- inspection of committed state (tests, demo, operators; src/views.cpp) ----
    std::vector<sequence_instance> instances() const;
    std::optional<sequence_instance> find_instance(const std::string& sequence, const std::string& context_id) const;
    std::vector<message_record> messages() const;
    std::vector<message_record> messages_with_key(const claim_key& key) const;
    std::size_t claim_count() const;
    /// Transactions begun and not yet committed, rolled back or killed.
    std::size_t open_transaction_count() const;

private:
    friend class transaction;
    friend struct testing;  // the test hooks (memory/testing.hpp)
    using lock_guard = std::unique_lock<std::mutex>;

    // The member templates are defined in src/store_internals.hpp, beside their only callers.
    void ensure_usable(detail::tx_state& tx);
    /// After a failed statement only a rollback (to a savepoint) is accepted, as in PostgreSQL.
    static void ensure_not_aborted(const detail::tx_state& tx);

    /// Parks (driven task) or waits (free thread) while `conflict()` holds, a free thread at most
    /// `patience` (default lock_timeout); rechecks liveness.
    template <class Conflict>
    void wait_while(lock_guard& lock, detail::tx_state* tx, std::string_view label, Conflict conflict,
                    std::optional<std::chrono::milliseconds> patience = std::nullopt);

    /// Runs one operation of `tx`: parks a driven task first, then holds the store mutex.
    template <class Op>
    auto operate(detail::tx_state& tx, std::string_view label, Op op);

    template <class Id, class... Hash>
    static bool held_by_other(const std::unordered_map<Id, std::uint64_t, Hash...>& locks, const Id& id, const detail::tx_state& tx);

    void require_instance(instance_id id) const;

    // ---- visibility: committed rows overlaid with the transaction's own writes ----
    std::optional<message_record> visible_message(detail::tx_state& tx, message_id id) const;
    detail::stored_message* committed_message(message_id id);
    const detail::stored_message* committed_message(message_id id) const;

    /// Calls `visit(id, row)` for every committed message with `key` (several in old databases).
    template <class Visit>
    void for_each_committed(const claim_key& key, Visit visit) const;

    /// How the transaction's own writes change the number of PROCESSED rows of `type`.
    int own_processed_delta(const detail::tx_state& tx, instance_id instance, const std::string& type) const;

    // ---- locks ----
    /// Takes the key's slot for `tx`, waiting while another transaction holds it.
    detail::claim_slot& hold_claim(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label);
    void lock_instance_row(lock_guard& lock, detail::tx_state& tx, instance_id id, std::string_view label);
    /// store_message's per-key lock, like pg_advisory_xact_lock on the key.
    void lock_key(lock_guard& lock, detail::tx_state& tx, const claim_key& key, std::string_view label);
    /// A new entry of the lock table for `tx` (a key lock or a savepoint), within lock_entries.
    void take_lock_entry(detail::tx_state& tx, std::string_view doing);
    /// Fails `tx`'s operation as a full lock table does, once, when a test armed it.
    void fail_if_armed(detail::tx_state& tx, std::string_view doing);
    [[noreturn]] static void out_of_shared_memory(detail::tx_state& tx, std::string_view doing);

    /// The rows with `key` that `tx` sees, oldest first.
    std::vector<message_record> visible_messages(detail::tx_state& tx, const claim_key& key) const;

    message_id insert_own(detail::tx_state& tx, message_record row);

    /// Changes the state of row `id` (and its payload when `payload` has one) as an UPDATE does:
    /// a row deleted meanwhile (housekeeping removed its instance while a state step ran beside
    /// a claim transaction that had lost its connection) is left alone, as PostgreSQL does.
    void update_own(lock_guard& lock, detail::tx_state& tx, message_id id, message_state state, timestamp now,
                    std::optional<envelope> payload = std::nullopt, std::optional<std::int64_t> number = std::nullopt);
    /// Releases the locks taken after `kept` (a savepoint's locks, or none at all).
    void release_locks(detail::held_locks& locks, const detail::held_locks& kept);

    void finish(detail::tx_state& tx);
    void kill(detail::tx_state& tx);

    bool referenced(instance_id id) const;  // by a lock or an uncommitted write: a DELETE would wait

    // ---- durability (see testing::crash; src/durability.cpp) ----
    // Every other change of the committed tables waits for its flush, in the same critical section:
    // only an unflushed commit's changes can be lost, so only they are recorded.
    struct undo_record;
    /// Opens the record of a commit that does not wait for its flush, before it is applied.
    undo_record& unflushed_commit();
    /// A flush: every commit so far is durable.
    void flush_wal();
    /// Applies `tx` as a commit does: one that wrote anything waits for its flush unless it skips
    /// it; one that wrote nothing waits for none, but flushes what it owes its steps beside.
    void commit_durably(detail::tx_state& tx);
    /// An ending claim transaction flushes its steps beside, unless a statement found it lost.
    void settle_flush_owed(detail::tx_state& tx);
    static bool writes_anything(const detail::tx_state& tx);
    /// Puts back what the commit of `record` changed (the commits after it are undone already).
    void undo(undo_record& record);
    /// Puts row `id` back as it was before (none: removes the row the commit inserted).
    void undo_message(message_id id, std::optional<detail::stored_message>&& before);
    // Helpers of the other concepts (src/actions.cpp, src/views.cpp, src/housekeeping.cpp).
    pending_actions actions_of(instance_id instance) const;
    /// Why no action may be requested on `row` now, if it may not.
    static std::optional<request_outcome> action_refusal(const detail::stored_message& row);
    static numbered_progress progress_of(const instance_row& row);
    std::optional<instance_view> view_of(const instance_row& row, const message_page& page) const;
    /// The committed messages of `row` in `page`, and one more if one follows, by id; counts them all per state.
    std::vector<message_id> page_ids(const instance_row& row, const message_page& page, message_state_counts& counts) const;
    std::optional<message_view> view_of(message_id id) const;
    /// Up to `limit` OPEN instances matching `pick`, by (retain_until, id) after `after`.
    template <class Pick>
    std::vector<sequence_instance> by_retention(std::size_t limit, const scan_position& after, Pick pick) const;
    /// How much of its retention the instance has used at `now` (1 and more: expired).
    static double used_share(const sequence_instance& i, timestamp now);
    std::vector<sequence_instance> rows_of(const std::vector<instance_id>& ids) const;
    /// The cascade of deleting an instance, with its messages, claims and requests.
    void erase_instance(detail::instance_table::iterator it);
    /// The committed instance of (sequence, context id), if there is one.
    const instance_row* find_instance_row(const std::string& sequence, const std::string& context_id) const;
    /// `row` as the store contract returns it, its sequence name copied from the store's own
    /// (a cache line the row's own copy would cost).
    sequence_instance public_row(const instance_row& row) const;
    /// Adds `row` to, or drops it from, the index of instances by (sequence, context id).
    void index_instance(const instance_row& row);
    void unindex_instance(const instance_row& row);
    /// Drops the committed row `id` of an erased or undone message from its key's slot, and gives
    /// the slot back if nothing else refers to it.
    void unindex_message_key(message_id id, const detail::stored_message& row);
    /// Calls `forward` with the committed WAITING messages of `instance`, in bounded pages.
    void forward_waiting_of(const instance_row& instance, const forward_waiting& forward) const;

    /// Ids of up to `limit` instances matching `pick`, ordered by `order_by`; the mutex is held.
    template <class Pick, class OrderBy>
    std::vector<instance_id> instances_where_locked(std::size_t limit, Pick pick, OrderBy order_by) const;
    template <class Pick, class OrderBy>
    std::vector<instance_id> instances_where(std::size_t limit, Pick pick, OrderBy order_by) const;

    /// Makes `tx`'s writes the committed tables, recording what they replace in `undo` if given.
    void apply(detail::tx_state& tx, undo_record* undo);
    void apply_message(message_record&& row, undo_record* undo);
    void forget_message_indexes(message_id id, const detail::stored_message& row);
    void index_message(message_id id, const detail::stored_message& row);

    store_options options_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    instance_id next_instance_id_ = 1;
    message_id next_message_id_ = 1;
    std::uint64_t next_tx_ = 1;

    detail::instance_table instances_;
    detail::hash_index instance_index_;  // instance_key_hash(sequence, context) -> the row's address: one lookup less
    std::unordered_map<std::string, std::uint32_t> sequence_numbers_;  // sequence name -> instance_row::sequence_number
    std::vector<const std::string*> sequence_names_;  // by sequence_number - 1: the names above
    std::deque<detail::stored_message> messages_;  // message id N at index N-1; ids are dense
    detail::claim_table claims_;  // also the committed messages' index by key
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
    std::vector<undo_record> unflushed_;  // what each commit not flushed yet changed, oldest first
    std::size_t wal_flushes_ = 0;
    std::size_t lock_table_exhausted_ = 0;  // operations refused over lock_entries
};

/// One transaction on its own "connection". Move-only; rolls back when destroyed unactive.
/// Not thread-safe: one thread uses a transaction at a time.
class store::transaction {
public:
    transaction(transaction&& other) noexcept;
    transaction& operator=(transaction&& other) noexcept;
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    ~transaction();

    std::uint64_t id() const noexcept;
    /// True until commit, rollback or a lost connection.
    bool active() const;

    /// Three steps, each a point where a driven task parks: the claim insert, the instance lock
    /// (itself two: the lock, then the types) and the key's rows.
    claim_result claim(const claim_request& request);
    /// The claims in key order, then the won claims' instances locked in id order, then the
    /// won keys' rows: each step a park point, as in claim().
    std::vector<claim_result> claim_batch(std::span<const claim_request> requests);
    void delete_claim(const claim_key& key);
    std::vector<message_record> find_messages(const claim_key& key);
    instance_lock lock_instance(instance_id instance);
    /// The instance's types as lock_instance reads them, without the lock (tests of visibility).
    types_by_state message_types(instance_id instance);
    std::vector<message_record> waiting_messages(instance_id instance, std::span<const std::string> types);
    std::size_t count_waiting(instance_id instance, std::size_t up_to);
    std::optional<std::int64_t> last_released_number(instance_id instance);
    std::vector<message_record> waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit);
    void skip_numbers(instance_id instance, std::int64_t through);

    /// Test support, not the store contract: inserts `row` as it is and returns its id.
    message_id insert_message(message_record row);
    void update_message_state(message_id id, message_state state, timestamp now);
    stored_as store_message(message_record row);
    void close_instance(instance_id instance, timestamp now);

    savepoint_id savepoint();
    void rollback_to(savepoint_id point);

    seqinbox::pending_actions pending_actions(instance_id instance);
    std::vector<message_record> action_targets(instance_id instance, std::span<const message_id> ids);
    void clear_actions(instance_id instance, const seqinbox::pending_actions& read);

    /// A business key-value table beside the inbox tables, so that tests can show a listener
    /// committing atomically with the inbox state (propagation::required).
    void put(const std::string& key, const std::string& value);
    std::optional<std::string> get(const std::string& key);

    /// Makes the writes visible and releases the locks; throws (connection) if it was lost.
    void commit();
    /// Discards the writes; a no-op on an ended transaction.
    void rollback();

private:
    friend class store;
    transaction(store& s, detail::tx_state* tx);

    template <class Op>
    auto run(std::string_view label, Op op);

    bool insert_claim(const claim_request& request);
    void end_quietly() noexcept;
    void abandon() noexcept;

    store* store_;
    detail::tx_state* tx_;  // owned by the store's pool; returned there when this object dies
};

class store::job_lock {
public:
    job_lock() = default;
    job_lock(job_lock&& other) noexcept;
    job_lock& operator=(job_lock&& other) noexcept;
    ~job_lock();
    explicit operator bool() const noexcept { return store_ != nullptr; }
    /// Held until released: a lock of this process does not expire.
    bool renew() const noexcept { return store_ != nullptr; }

private:
    friend class store;
    job_lock(store* s, std::string job);
    void release() noexcept;
    store* store_ = nullptr;
    std::string job_;
};

static_assert(seqinbox::store_policy<store>, "memory::store must model seqinbox::store_policy");
static_assert(seqinbox::action_store<store>, "memory::store must model seqinbox::action_store");
static_assert(seqinbox::housekeeping_store<store>, "memory::store must model seqinbox::housekeeping_store");
static_assert(seqinbox::view_store<store>, "memory::store must model seqinbox::view_store");

}  // namespace seqinbox::memory
