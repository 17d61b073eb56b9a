#pragma once
// The PostgreSQL store: the seqinbox::store_policy on the schema of schema/postgresql/ (see
// seqinbox/store/concept.hpp for the semantics every store has).
//
// Connections come from a pool of `pool_size` SOCI sessions. A claim transaction holds one
// connection for its whole life; a `requires_new` step takes a second one while T1 waits, so give
// the pool at least two connections per consumer thread. Statements are prepared once per
// connection and reused (sent unnamed instead through a transaction pooler: store_options::
// through); every value travels as a parameter. A connection that fails with SQLSTATE
// class 08 or 57P01..57P03 is reported as seqinbox::error(connection) and replaced by a new one on
// its next lease.
//
// Writes whose result nobody reads (message inserts, state changes, claim deletes, closing,
// skipped numbers) are sent with the transaction's next read or at commit; a transaction made of
// one such write runs it alone, without BEGIN/COMMIT round trips. Failures of deferred writes surface at commit(),
// which never hides a failure. Statements that follow each other share a round trip (libpq
// pipeline mode), each still run on its own: deferred writes, BEGIN, the claim, the instance lock
// (only when the claim was won), the read of the claimed key's rows and of the instance's
// message types; the instance lock and the read of its types; deferred writes and COMMIT. A
// store_message of a key the transaction claimed without rows is deferred too: its outcome is
// known (see transaction::store_message).
//
// Thread safety: a store may be used from any number of threads at once; a transaction by one
// thread at a time. SOCI stays private: this header needs neither SOCI nor libpq.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "seqinbox/postgresql/pooler.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/views.hpp"
#include "seqinbox/store/model.hpp"

namespace soci {
class session;
}

namespace seqinbox::postgresql {

struct store_options {
    /// libpq connection string, key=value or URI form. Several hosts (host=a,b port=p,q
    /// target_session_attrs=read-write, or postgresql://a:p,b:q/db?target_session_attrs=read-write)
    /// reach whichever is the primary now: a connection that lands on a standby is a lost one.
    std::string conninfo;
    /// Connections kept open at most (two per consumer thread with requires_new steps).
    std::size_t pool_size = 8;
    /// How long begin() waits for a free connection before a retryable error.
    std::chrono::milliseconds acquire_timeout{std::chrono::seconds(30)};
    /// idle_in_transaction_session_timeout of every connection: a claim or lock transaction
    /// abandoned by a stuck process ends after this long. -1 s keeps the server's setting.
    std::chrono::seconds idle_in_transaction_timeout{600};
    /// lock_timeout of every connection (claim and instance-lock waits); 0 waits without limit.
    std::chrono::milliseconds lock_timeout{0};
    /// lock_timeout of an operator action request (SET LOCAL, in the request's round trip): a
    /// delivery in progress holds the row it must lock, for as long as its listeners take, so
    /// the request gives up after this long with request_locked (seqinbox/store/actions.hpp)
    /// instead of holding its caller (an API serving thread); 0 waits without limit.
    std::chrono::milliseconds request_lock_timeout{2'000};
    /// Sequence instances whose rows create_or_get_instance remembers, so that a delivery to a
    /// context seen before skips a round trip; 0 remembers none.
    std::size_t instance_cache_size = 10'000;
    /// Two kinds of commit do not wait for their WAL flush (synchronous_commit off for that
    /// transaction alone): the creation of a sequence instance, and a state step beside a claim
    /// transaction (store_message_beside). Both precede the claim transaction's commit, which
    /// writes WAL after theirs and waits for its flush, so flushing it flushes them too: a server
    /// crash loses all three or none of them, and the redelivery does the delivery again. A
    /// claim transaction that ends without that commit flushes explicitly. Every other commit
    /// keeps the server's setting; true makes these wait too.
    bool flush_every_commit = false;
    /// none: direct connections (or a session-mode pooler); transaction: see pooler. Last, so
    /// that options written positionally before it came still mean the same.
    pooler through = pooler::none;
    /// How long a housekeeping job lock lasts unless renewed (the housekeeper renews it before each
    /// batch, so a batch must take less): how long a job stays with a holder that died.
    std::chrono::milliseconds job_lease{std::chrono::seconds(60)};
};

/// Counters of one store, for benchmarks and operators.
struct store_statistics {
    std::uint64_t round_trips = 0;           ///< statements, BEGIN, COMMIT, ROLLBACK sent
    std::uint64_t connections_opened = 0;    ///< sessions opened, first ones included
    std::uint64_t connections_replaced = 0;  ///< broken sessions dropped from the pool
    std::uint64_t unflushed_commits = 0;     ///< instance creations and state steps not waiting for the flush
};

namespace detail {
class pool;
class connection;
class pipeline;
class result;
struct named_sql;
}  // namespace detail

class store {
public:
    class transaction;
    using savepoint_id = std::uint32_t;

    /// Opens one connection and checks the schema. Throws seqinbox::error with category
    /// connection (server unreachable, bad connection string: the message names the redacted
    /// conninfo), schema_mismatch (tables missing or older/newer than this library: the message
    /// names `seqinbox migrate`), or misuse (pool_size 0).
    explicit store(store_options options);
    ~store();
    store(const store&) = delete;
    store& operator=(const store&) = delete;

    /// Leases a connection and starts a READ COMMITTED transaction on it.
    transaction begin();

    /// Answers from the instance cache when it can (the row as it was read then: only its id is
    /// sure to be current, until the instance is removed; see transaction::claim).
    sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                             timestamp created_at, timestamp retain_until);
    /// create_or_get_instance for many contexts: those the cache does not know in one statement
    /// (inserted in key order, so that concurrent calls never wait for each other in a cycle),
    /// one round trip unless a concurrent creation commits meanwhile. Results in request order.
    std::vector<sequence_instance> create_or_get_instances(std::span<const instance_creation> requests);
    /// Drops the instance from the instance cache (the engine found it to be another context's).
    void forget_instance(instance_id id);

    /// transaction::store_message as one autocommitted statement (one round trip).
    stored_as store_message(message_record row);
    /// store_message, not waiting for its WAL flush: `claim`'s end makes it durable (its commit
    /// flushes both; when it ends otherwise, rollback() flushes). See flush_every_commit.
    stored_as store_message_beside(transaction& claim, message_record row);

    /// Operator actions (seqinbox::action_store; src/actions.cpp), each one UPDATE in a
    /// transaction of its own (one round trip); request_locked after request_lock_timeout.
    request_outcome request_message_action(message_id id, message_action action, timestamp now);
    request_outcome request_instance_action(instance_id id, instance_action action, timestamp now);
    std::vector<instance_id> instances_with_pending_actions(std::size_t limit);

    /// Housekeeping (seqinbox::housekeeping_store; src/housekeeping.cpp). A job lock is a lease, a
    /// row of seqinbox_job_lease taken by one statement (src/job_lease.cpp): it holds no connection
    /// while it lives, lasts store_options::job_lease unless renewed, and is given back when
    /// destroyed; a holder that dies keeps the job for what is left of its lease.
    class job_lock;
    job_lock try_lock_job(const std::string& job);
    std::vector<instance_id> closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                              scan_position& after);
    std::vector<sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after);
    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit, scan_position& after);
    /// One transaction, a handful of round trips, and a round trip per page of WAITING messages.
    std::size_t remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward);
    /// remove_instances of one: whether it was deleted.
    bool remove_instance(instance_id id, const removal_condition& condition, const forward_waiting& forward) {
        return remove_instances({&id, 1}, condition, forward) == 1;
    }
    /// Numbered sequences (src/numbering.cpp): one autocommitted statement, a loose scan of the
    /// instances holding WAITING numbered rows from `after.id` on.
    std::vector<instance_id> stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after);

    /// Read views (seqinbox::view_store; src/views.cpp).
    std::vector<instance_count> instance_counts();
    std::vector<message_count> message_counts();
    std::vector<sequence_instance> expired_instances(timestamp now, std::size_t limit, const scan_position& after = {});
    std::vector<sequence_instance> expiring_instances(timestamp now, double share, std::size_t limit, const scan_position& after = {});
    std::vector<waiting_instance> waiting_longest(std::size_t limit);
    std::vector<retention_count> retention_counts(timestamp now, double share);
    std::optional<instance_view> view_instance(const std::string& sequence, const std::string& context_id, const message_page& page = {});
    std::optional<instance_view> view_instance(instance_id id, const message_page& page = {});
    std::optional<message_view> find_message(message_id id);
    std::optional<message_view> find_message(const claim_key& key);

    /// How many records one batch transaction may decide (the engine splits larger batches):
    /// what keeps its entries in PostgreSQL's shared lock table, max_locks_per_transaction x
    /// (max_connections + max_prepared_transactions) as read at start, within its share: half the
    /// table for this store's pool_size connections, each of which may run a batch at once, less
    /// 64 entries for the tables and indexes it touches. A record takes one entry (its key's
    /// advisory lock at storing), two when listeners join the transaction (their savepoint's
    /// transaction id). 168 and 336 with the server's defaults (64 x 100) and pool_size 8.
    std::size_t max_batch_records(bool listeners_join) const noexcept;
    /// The lock table's size read at start, and how it was computed, for messages.
    const std::string& lock_table() const noexcept;

    store_statistics statistics() const;
    const store_options& options() const noexcept;

private:
    // The way to a connection (store.cpp; the transaction is in transaction_impl.hpp), for every part of the store.
    using connection_work = std::function<void(detail::connection&)>;
    /// Runs `work` as one autocommitted statement on a leased connection.
    void run_autocommitted(std::string_view doing, const connection_work& work);
    /// Runs `work` inside `tx`, after the writes it deferred.
    static void run_in(transaction& tx, std::string_view doing, const connection_work& work);
    /// run_autocommitted returning what `op(connection)` returns (src/store_parts.hpp).
    template <class Op>
    auto autocommitted(std::string_view doing, Op&& op);
    /// The instance row matching `where` (with `keys` bound in order), read inside `tx`.
    template <class... Keys>
    static std::optional<sequence_instance> one_instance(transaction& tx, std::string_view doing, const std::string& where,
                                                         const Keys&... keys);
    /// Up to `limit` instance rows `sql` answers, `values` then the limit bound in order.
    template <class... Values>
    std::vector<sequence_instance> instances_where(std::string_view doing, const std::string& sql, std::size_t limit, const Values&... values);

    // Operator actions (src/actions.cpp).
    /// Runs a request statement (actions.cpp) on row `id`, which `target` names ("message 7");
    /// `refused` names the reason from the state the row had and the statement's details column
    /// when it wrote nothing.
    request_outcome requested(std::string_view target, const detail::named_sql& sql, std::string_view action, timestamp now, std::int64_t id,
                              request_outcome (*refused)(std::string_view state, bool details));
    /// Sends the statements `queue` adds inside `tx` in one round trip, with BEGIN when it has
    /// not begun and the writes it deferred; returns their results (store.cpp).
    using batch_work = std::function<void(detail::pipeline&)>;
    static std::vector<detail::result> batch_in(transaction& tx, std::string_view doing, const batch_work& queue);
    // Housekeeping (src/housekeeping.cpp).
    /// `sql` with `params` (text, nullopt for NULL) as one autocommitted statement.
    detail::result autocommitted_statement(std::string_view doing, const detail::named_sql& sql,
                                           std::vector<std::optional<std::string>> params);
    /// Calls `forward` with the WAITING messages of `instances` (ids `listed`: array_literal) in
    /// `tx`, page by page (forward_page_rows, forward_page_bytes).
    static void forward_waiting_pages(transaction& tx, const std::string& listed, std::span<const sequence_instance> instances,
                                      const forward_waiting& forward);
    // Read views (src/views.cpp).
    std::vector<std::tuple<std::string, std::string, std::size_t>> grouped_counts(std::string_view doing, const std::string& sql);
    /// The instance's view with `page` of its messages read in `tx`, which it commits.
    static std::optional<instance_view> view_of(transaction& tx, const sequence_instance& instance, const message_page& page);
    /// The instance's numbered_progress, read in `tx`.
    static numbered_progress numbered_progress_of(transaction& tx, instance_id instance);
    /// The message row matching `where` (with `keys` bound in order) and its instance.
    template <class... Keys>
    std::optional<message_view> message_where(const std::string& where, const Keys&... keys);
    /// Reads the size of the server's lock table (max_batch_records).
    void read_lock_table(soci::session& session);

    std::shared_ptr<detail::pool> pool_;
    std::size_t lock_table_entries_ = 0;
    std::string lock_table_;
};

/// One database transaction on a leased connection. Move-only; destroyed without commit() it
/// rolls back and returns its connection (or drops it when broken).
class store::transaction {
public:
    transaction(transaction&&) noexcept;
    transaction& operator=(transaction&&) noexcept;
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    ~transaction();

    /// One round trip. Throws seqinbox::error(retryable, SQLSTATE 23503) when the instance no
    /// longer exists, and drops it from the instance cache.
    claim_result claim(const claim_request& request);
    /// seqinbox::batch_claim_transaction: one round trip with BEGIN (when the transaction has not
    /// begun) and the deferred writes, whatever the batch's size. Throws seqinbox::error(retryable,
    /// SQLSTATE 23503) when an instance of the batch no longer exists, and drops every instance of
    /// the batch from the instance cache; seqinbox::error(misuse) for a key requested twice.
    std::vector<claim_result> claim_batch(std::span<const claim_request> requests);
    void delete_claim(const claim_key& key);
    /// Every row with the key, by id, without payloads (the engine reads ids and states).
    std::vector<message_record> find_messages(const claim_key& key);
    /// One round trip: the lock, then the types.
    instance_lock lock_instance(instance_id instance);
    /// The instance's types as lock_instance reads them, without the lock (housekeeping).
    types_by_state message_types(instance_id instance);
    /// One round trip, with the deferred writes.
    std::vector<message_record> waiting_messages(instance_id instance, std::span<const std::string> types);
    /// One round trip, with the deferred writes.
    std::size_t count_waiting(instance_id instance, std::size_t up_to);
    /// The same for many instances, in the same round trip (answers in query order).
    std::vector<std::vector<message_record>> waiting_messages(std::span<const waiting_query> queries);
    /// Numbered sequences (src/numbering.cpp). Each read is one statement in one round trip, with
    /// the deferred writes; skip_numbers is deferred like a write.
    std::optional<std::int64_t> last_released_number(instance_id instance);
    std::vector<message_record> waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit);
    void skip_numbers(instance_id instance, std::int64_t through);
    /// Test support, not the store contract: inserts `row` as it is (deferred).
    void insert_message(message_record row);
    /// seqinbox_store_message under the key's advisory lock, held until this transaction ends.
    /// Deferred, answering `inserted`, for a key this transaction claimed and found without rows
    /// (and stored nothing of since): only a state step beside a dead claim transaction of the
    /// key could store a row meanwhile, and the function then keeps or updates that row as ever.
    stored_as store_message(message_record row);
    void update_message_state(message_id id, message_state state, timestamp now);
    void close_instance(instance_id instance, timestamp now);
    /// Operator actions (src/actions.cpp): read under the instance lock; cleared with the commit.
    seqinbox::pending_actions pending_actions(instance_id instance);
    std::vector<message_record> action_targets(instance_id instance, std::span<const message_id> ids);
    void clear_actions(instance_id instance, const seqinbox::pending_actions& read);
    /// Deferred like a write (see the top of this header): no round trip of its own.
    savepoint_id savepoint();
    void rollback_to(savepoint_id point);
    /// Ends the savepoint's scope; deferred, and nothing at all when nothing was sent within it.
    void release(savepoint_id point);
    void commit();
    void rollback();

    /// The SOCI session of this transaction, for listeners that write business data in it
    /// (propagation::required / requires_new). Include <soci/soci.h> to use it. Pending writes are
    /// sent first. Do not commit or roll back through it.
    soci::session& session();

    /// txid_current() of this transaction.
    std::uint64_t id();

    /// True until commit(), rollback() or a lost connection (also one seen by the listener).
    bool active() const noexcept;

    /// True when a statement failed in this transaction, so that PostgreSQL ignores the rest
    /// until a rollback: after a listener returned, its own statement failed and it went on.
    bool aborted() const noexcept;

private:
    friend class store;
    class impl;
    explicit transaction(std::unique_ptr<impl> state);
    std::unique_ptr<impl> impl_;
};

class store::job_lock {
public:
    job_lock() noexcept;
    job_lock(job_lock&&) noexcept;
    job_lock& operator=(job_lock&&) noexcept;
    job_lock(const job_lock&) = delete;
    job_lock& operator=(const job_lock&) = delete;
    ~job_lock();
    explicit operator bool() const noexcept { return impl_ != nullptr; }
    /// Extends the lease by store_options::job_lease from now; false (and the lock empty) when it
    /// had expired and another holder took it. One round trip.
    bool renew();

private:
    friend class store;
    struct impl;
    explicit job_lock(std::unique_ptr<impl> state) noexcept;
    std::unique_ptr<impl> impl_;
};

static_assert(seqinbox::store_policy<store>, "seqinbox::postgresql::store must model seqinbox::store_policy");
static_assert(seqinbox::batch_claim_transaction<store::transaction>,
              "seqinbox::postgresql::store::transaction must model seqinbox::batch_claim_transaction");
static_assert(seqinbox::housekeeping_store<store>, "seqinbox::postgresql::store must model seqinbox::housekeeping_store");
static_assert(seqinbox::view_store<store>, "seqinbox::postgresql::store must model seqinbox::view_store");
static_assert(seqinbox::action_store<store>, "seqinbox::postgresql::store must model seqinbox::action_store");

}  // namespace seqinbox::postgresql
