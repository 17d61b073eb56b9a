#pragma once
// The MariaDB store: the seqinbox::store_policy on the schema of schema/mariadb/ (InnoDB; see
// seqinbox/store/concept.hpp for the semantics every store has). MariaDB 10.6 or later: the claim
// needs INSERT ... RETURNING, housekeeping SKIP LOCKED.
//
// Connections come from a pool of `pool_size` SOCI sessions (SOCI's MySQL backend). A claim
// transaction holds one connection for its whole life; a `requires_new` step takes a second one
// while T1 waits, so give the pool at least two connections per consumer thread. Every session
// runs READ COMMITTED (InnoDB's default REPEATABLE READ would hide rows committed while a delivery
// waited for a lock), time zone UTC, a strict sql_mode (a value that does not fit is an error,
// never a warning) and innodb_lock_wait_timeout from the options. A connection that fails with
// a lost-connection error (client errors 2006, 2013 and the like, 1927 connection killed) is
// reported as seqinbox::error(connection) and dropped from the pool; the delivery is not
// acknowledged. A deadlock (1213) or lock wait timeout (1205) is seqinbox::error(retryable); after
// either the server has rolled the transaction back (1205: this store rolls it back), so it is no
// longer active().
//
// How InnoDB's locks map onto the contract:
//  - The claim is `INSERT ... ON DUPLICATE KEY UPDATE message_type = message_type RETURNING
//    claim_token`: only a duplicate key is tolerated (never INSERT IGNORE, which turns a foreign
//    key failure into a warning and 0 rows); a concurrent insert of the key waits for its holder.
//    Won or lost is told by the token read back (this statement's own or another's): SOCI
//    connects with CLIENT_FOUND_ROWS, under which the affected-row count is 1 either way.
//  - The instance lock is an exclusive lock on the instance's row of sequence_instance_lock
//    (created by the locking insert itself), never on the sequence_instance row: InnoDB's foreign
//    key checks take shared locks on that parent row, so a state step on a second connection
//    inserting a message of the instance would wait for the claim transaction, which waits for it.
//    For the same reason close_instance (an UPDATE of the parent row) is sent with the commit.
//    That UPDATE still needs the parent row exclusively while claims waiting for the instance
//    lock hold it shared: InnoDB breaks that cycle by rolling one side back, usually the claimant,
//    and a claim that began its transaction is then redone from BEGIN (up to 5 times).
//  - store_message's per-key lock is the key's row of sequenced_message_key_lock, taken the same
//    way and held until the transaction ends.
//  - ROLLBACK TO SAVEPOINT undoes the writes after the savepoint and releases the row locks
//    taken after it (MariaDB 10.11, checked for an insert and a FOR UPDATE; MySQL's InnoDB keeps
//    the locks of existing rows until the transaction ends).
//
// Durability: MariaDB has no per-transaction asynchronous commit. Every commit of this store,
// store_message_beside included, is as durable as the server makes commits:
// innodb_flush_log_at_trx_commit = 1 (the default) waits for the redo log's flush at each commit.
// durable_commits() says what the server was set to at start.
//
// Round trips: statements that need no answer in between go in one multi-statement query (the
// connection allows several per query; every value in them is a literal the store wrote). BEGIN
// goes with a transaction's first statement. A claim, or a batch of them whatever its size: BEGIN,
// the claim insert, the lock of the instances whose claims it won (found by the token it wrote),
// the instances with their types and the keys' rows (1); COMMIT (1), carrying the UPDATEs of
// instances closed. store_message: the key lock and the key's rows (1), the write (1); in a
// transaction of its own, BEGIN, the key lock, the insert when the key has no row yet and COMMIT
// (1), else two more. A context's instance missing from the cache: its read (1), and for a new
// context its insert (1). transaction::session() turns the multi-statement option off for the
// listener (1), and the store's next multi-statement send turns it on again (1).
//
// Thread safety: a store may be used from any number of threads at once; a transaction by one
// thread at a time. SOCI stays private: this header needs neither SOCI nor the MariaDB client.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/model.hpp"
#include "seqinbox/store/views.hpp"

namespace soci {
class session;
}

namespace seqinbox::mariadb {

struct store_options {
    /// mariadb://user:password@host:port/database (user, password and database percent-decoded;
    /// port 3306 when left out).
    std::string url;
    /// Connections kept open at most (two per consumer thread with requires_new steps).
    std::size_t pool_size = 8;
    /// How long begin() waits for a free connection before a retryable error.
    std::chrono::milliseconds acquire_timeout{std::chrono::seconds(30)};
    /// innodb_lock_wait_timeout of every connection (claim, instance and key lock waits), whole
    /// seconds, at least 1 (InnoDB has no unlimited wait): past it, seqinbox::error(retryable).
    std::chrono::seconds lock_wait_timeout{50};
    /// How long an operator action request waits for its row's lock (whole seconds, rounded up:
    /// SET STATEMENT innodb_lock_wait_timeout): a delivery in progress holds it while its
    /// listeners run, so the request gives up with request_locked (seqinbox/store/actions.hpp)
    /// instead of holding its caller.
    std::chrono::milliseconds request_lock_timeout{2'000};
    /// Sequence instances whose rows create_or_get_instance remembers, so that a delivery to a
    /// context seen before skips a round trip; 0 remembers none.
    std::size_t instance_cache_size = 10'000;
};

/// Counters of one store, for benchmarks and operators.
struct store_statistics {
    std::uint64_t round_trips = 0;           ///< statements, BEGIN, COMMIT, ROLLBACK sent
    std::uint64_t connections_opened = 0;    ///< sessions opened, first ones included
    std::uint64_t connections_replaced = 0;  ///< broken sessions dropped from the pool
};

namespace detail {
class pool;
}

class store {
public:
    class transaction;
    using savepoint_id = std::uint32_t;

    /// Opens one connection and checks the schema. Throws seqinbox::error with category
    /// configuration (a url that does not parse: the message names it redacted), connection
    /// (server unreachable), schema_mismatch (tables missing or older/newer than this library:
    /// the message names `seqinbox migrate`), or misuse (pool_size 0).
    explicit store(store_options options);
    ~store();
    store(const store&) = delete;
    store& operator=(const store&) = delete;

    /// Leases a connection for a READ COMMITTED transaction (begun with its first statement).
    transaction begin();

    /// Answers from the instance cache when it can. Otherwise reads the row (a plain read: an
    /// upsert would take an exclusive lock on it and wait for every claim transaction whose
    /// foreign key checks hold it shared), inserting it when missing (a concurrent creation of
    /// the same row makes the insert fail with a duplicate key, and the row is read again).
    sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                             timestamp created_at, timestamp retain_until);
    /// create_or_get_instance for many contexts, in request order.
    std::vector<sequence_instance> create_or_get_instances(std::span<const instance_creation> requests);
    /// Drops the instance from the instance cache (the engine found it to be another context's).
    void forget_instance(instance_id id);

    /// transaction::store_message in a transaction of its own, committed before it returns.
    stored_as store_message(message_record row);
    /// The same (a transaction of its own, durable at its commit, see the top of this header).
    stored_as store_message_beside(transaction& claim, message_record row);
    /// Why `row` (a WAITING row with its record) cannot be stored, or "": its statement would be
    /// longer than one query may carry (max_allowed_packet, as of the newest session; values
    /// travel as hex, so a record must stay under half of it).
    std::string buffering_problem(const message_record& row) const;

    /// Operator actions (seqinbox::action_store; src/actions.cpp): a request is a transaction of its
    /// own (BEGIN, the row locked, the UPDATE, COMMIT); request_locked after request_lock_timeout.
    request_outcome request_message_action(message_id id, message_action action, timestamp now);
    request_outcome request_instance_action(instance_id id, instance_action action, timestamp now);
    std::vector<instance_id> instances_with_pending_actions(std::size_t limit);

    /// Housekeeping (seqinbox::housekeeping_store; src/housekeeping.cpp). A job lock is a named lock
    /// (GET_LOCK) of one pooled connection's session, named after the database and the job; it
    /// ends with its holder's connection.
    class job_lock;
    job_lock try_lock_job(const std::string& job);
    std::vector<instance_id> closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit,
                                              scan_position& after);
    std::vector<sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after);
    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit, scan_position& after);
    /// One transaction: the instance rows and their lock rows locked SKIP LOCKED in id order, two
    /// reads per page of WAITING messages, one DELETE (claims, messages, lock rows cascade).
    std::size_t remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward);
    /// remove_instances of one: whether it was deleted.
    bool remove_instance(instance_id id, const removal_condition& condition, const forward_waiting& forward) {
        return remove_instances({&id, 1}, condition, forward) == 1;
    }
    /// Numbered sequences (src/numbered.cpp): one read of the sequence's OPEN instances in id
    /// order (schema V4's index), each probed for a WAITING numbered message stored by `now`.
    std::vector<instance_id> stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after);

    /// Read views (seqinbox::view_store; src/views.cpp), plain reads of committed state.
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

    /// innodb_flush_log_at_trx_commit was 1 when the store started: every commit waits for the
    /// redo log's flush.
    bool durable_commits() const noexcept;

    store_statistics statistics() const;
    const store_options& options() const noexcept;

private:
    /// A request (actions.cpp) on row `id` of `table`, which `target` names ("message 7"): written
    /// when its state is `allowed` (or a message FAILED with its record); else `refused` names the
    /// reason from the state found and whether the row holds a record.
    request_outcome requested(std::string_view target, std::string_view table, std::string_view allowed, std::string_view action,
                              timestamp now, std::int64_t id, request_outcome (*refused)(std::string_view state, bool has_record));
    /// Up to `limit` instance rows (`i`) matching `where_and_order` (views.cpp).
    std::vector<sequence_instance> instances_where(std::string_view doing, const std::string& where_and_order, std::size_t limit);
    /// The view of the instance (`i`) matching `where`, with `page` of its messages (views.cpp).
    std::optional<instance_view> view_where(const std::string& where, const message_page& page);
    /// The message (`m`) matching `where` (an ORDER BY and LIMIT may follow), with its instance.
    std::optional<message_view> message_where(const std::string& where);
    /// Calls `forward` with the WAITING messages of `instance`, read in `tx` page by page.
    static void forward_waiting_pages(transaction& tx, const sequence_instance& instance, const forward_waiting& forward);

    std::shared_ptr<detail::pool> pool_;
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

    /// Throws seqinbox::error(retryable, SQLSTATE 23503) when the instance no longer exists, and
    /// drops it from the instance cache.
    claim_result claim(const claim_request& request);
    /// seqinbox::batch_claim_transaction (round trips: see the top of this header). Throws
    /// seqinbox::error(retryable, SQLSTATE 23503) when an instance of the batch no longer exists,
    /// and drops every instance of the batch from the instance cache; seqinbox::error(misuse)
    /// for a key requested twice.
    std::vector<claim_result> claim_batch(std::span<const claim_request> requests);
    void delete_claim(const claim_key& key);
    /// Every row with the key, by id, without payloads (the engine reads ids and states).
    std::vector<message_record> find_messages(const claim_key& key);
    /// One round trip: the lock, then the instance with its types.
    instance_lock lock_instance(instance_id instance);
    /// The instance's types as lock_instance reads them, without the lock.
    types_by_state message_types(instance_id instance);
    std::vector<message_record> waiting_messages(instance_id instance, std::span<const std::string> types);
    std::size_t count_waiting(instance_id instance, std::size_t up_to);
    /// The same for many instances, in one round trip (answers in query order).
    std::vector<std::vector<message_record>> waiting_messages(std::span<const waiting_query> queries);
    /// Numbered sequences (src/numbered.cpp), one round trip each. The number skipped through is
    /// kept on the instance's lock row (schema V4), which the instance lock holds: writing it
    /// waits for no claim (see the instance lock above).
    std::optional<std::int64_t> last_released_number(instance_id instance);
    std::vector<message_record> waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit);
    void skip_numbers(instance_id instance, std::int64_t through);
    /// Test support, not the store contract: inserts `row` as it is.
    void insert_message(message_record row);
    /// Operator actions (src/actions.cpp): read under the instance lock; cleared with the commit.
    seqinbox::pending_actions pending_actions(instance_id instance);
    std::vector<message_record> action_targets(instance_id instance, std::span<const message_id> ids);
    void clear_actions(instance_id instance, const seqinbox::pending_actions& read);
    /// Under the key's lock (sequenced_message_key_lock), held until this transaction ends.
    stored_as store_message(message_record row);
    void update_message_state(message_id id, message_state state, timestamp now);
    /// Sent with the commit (see the top of this header).
    void close_instance(instance_id instance, timestamp now);
    savepoint_id savepoint();
    void rollback_to(savepoint_id point);
    void release(savepoint_id point);
    void commit();
    void rollback();

    /// The SOCI session of this transaction, for listeners that write business data in it
    /// (propagation::required / requires_new). Include <soci/soci.h> to use it. The transaction
    /// is begun first. Do not commit or roll back through it.
    soci::session& session();

    /// Identifies this database transaction: the connection's id (CONNECTION_ID()) in the high
    /// 32 bits, the number of the transaction on that connection in the low ones.
    std::uint64_t id();

    /// True until commit(), rollback(), a lost connection, or an error after which the server
    /// rolled the transaction back (deadlock, lock wait timeout).
    bool active() const noexcept;

private:
    friend class store;
    class impl;
    explicit transaction(std::unique_ptr<impl> state);
    /// lock_instance of each of `ids` (ascending, distinct): one statement locks them all in that
    /// order, one read gives their rows and types, in one round trip (src/instances.cpp).
    std::map<instance_id, instance_lock> lock_instances(const std::vector<instance_id>& ids);
    /// claim and claim_batch once; redone_after_deadlock runs `claim` again from BEGIN after a
    /// deadlock when the claim began the transaction (src/claims.cpp).
    claim_result claim_once(const claim_request& request);
    std::vector<claim_result> claim_batch_once(std::span<const claim_request> requests);
    template <class Claim>
    auto redone_after_deadlock(Claim claim);
    /// The claim of `requests` (their VALUES rows `values`, in key order, `token` in each; every
    /// returned row to `on_claim_row`), the locks of the won claims' instances, the instances with
    /// their types, and the keys' rows into `rows`: one round trip, or claim_and_lock_in_parts
    /// when that is more than one query may carry (src/claims.cpp).
    template <class OnClaimRow>
    std::map<instance_id, instance_lock> claim_and_lock(std::span<const claim_request> requests, long long token,
                                                        const std::vector<std::string>& values, OnClaimRow on_claim_row,
                                                        std::vector<message_record>& rows);
    template <class OnClaimRow>
    std::map<instance_id, instance_lock> claim_and_lock_in_parts(std::span<const claim_request> requests, long long token,
                                                                 const std::vector<std::string>& values, OnClaimRow on_claim_row,
                                                                 std::vector<message_record>& rows);
    /// store_message; with `write_at_commit` its write goes with the COMMIT (a transaction of its own).
    stored_as store_message(message_record row, bool write_at_commit);
    /// In a fresh transaction, which it commits: inserts `row` when the key has no row yet (src/messages.cpp).
    bool insert_if_first(const message_record& row);
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
    /// Whether its session still holds the lock (one round trip); false (and the lock empty) once
    /// the session was lost, which released it.
    bool renew();

private:
    friend class store;
    struct impl;
    explicit job_lock(std::unique_ptr<impl> state) noexcept;
    std::unique_ptr<impl> impl_;
};

static_assert(seqinbox::store_policy<store>, "seqinbox::mariadb::store must model seqinbox::store_policy");
static_assert(seqinbox::batch_claim_transaction<store::transaction>,
              "seqinbox::mariadb::store::transaction must model seqinbox::batch_claim_transaction");
static_assert(seqinbox::savepoint_transaction<store::transaction>,
              "seqinbox::mariadb::store::transaction must model seqinbox::savepoint_transaction");
static_assert(seqinbox::view_store<store>, "seqinbox::mariadb::store must model seqinbox::view_store");
static_assert(seqinbox::housekeeping_store<store>, "seqinbox::mariadb::store must model seqinbox::housekeeping_store");
static_assert(seqinbox::action_store<store>, "seqinbox::mariadb::store must model seqinbox::action_store");

}  // namespace seqinbox::mariadb
