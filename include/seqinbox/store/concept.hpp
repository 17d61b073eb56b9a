#pragma once
// The store policy: where inbox state lives and which decisions it makes atomically.
//
// A store hands out transactions. Every operation named here must have the semantics of the
// PostgreSQL schema in schema/postgresql/ under READ COMMITTED:
//  - a transaction sees committed rows and its own writes, never another's uncommitted writes;
//  - deleting an instance cascades to its claims and messages;
//  - a lost connection rolls back the transaction and makes every later call on it throw
//    seqinbox::error with category `connection`.
// A transaction that is destroyed without commit() rolls back. commit() never hides a failure.
// Writes whose result is not returned may be deferred to the transaction's next read or commit.
// A transaction's operations come in three parts: the claim, the inbox state, and savepoints
// (needed only by a Propagation policy that joins the claim transaction).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// SQLSTATE (foreign_key_violation) of a claim on an instance that no longer exists.
inline constexpr std::string_view instance_removed_sqlstate = "23503";

/// The inbox state: the rows of instances and sequenced messages, and the transaction's end.
template <class T>
concept inbox_state_transaction =
    std::movable<T> &&
    requires(T& tx, const claim_key& key, instance_id instance, message_id id, timestamp now,
             const message_record& row, message_state state, std::span<const std::string> types) {
        /// Every row with this key: more than one can exist in databases older than the claim.
        { tx.find_messages(key) } -> std::same_as<std::vector<message_record>>;
        /// SELECT ... FOR NO KEY UPDATE of the instance row: waits while another transaction holds
        /// it and keeps it until commit or rollback; it does not block row inserts of other
        /// transactions that reference the instance (FK key-share locks). Then, under the lock,
        /// the distinct qualified types PROCESSED and WAITING in the instance: `waiting` is
        /// complete while the lock is held, as WAITING rows are inserted under it (but for a state
        /// step that commits after its claim transaction died; that delivery's redelivery heals).
        /// An instance that no longer exists throws seqinbox::error(retryable).
        { tx.lock_instance(instance) } -> std::same_as<instance_lock>;
        /// WAITING messages of the instance whose type is in `types`, oldest first, with payload.
        { tx.waiting_messages(instance, types) } -> std::same_as<std::vector<message_record>>;
        /// How many WAITING messages of the instance the transaction sees, counted no further than
        /// `up_to` (an answer of `up_to` means "at least"): the bound of a buffer (maxWaiting).
        { tx.count_waiting(instance, std::size_t{}) } -> std::same_as<std::size_t>;
        /// Numbered sequences: the highest number released in the instance, that is the highest
        /// `number` of its PROCESSED messages or the number given to skip_numbers, whichever is
        /// higher; empty when there is neither. Read under the instance lock.
        { tx.last_released_number(instance) } -> std::same_as<std::optional<std::int64_t>>;
        /// Numbered sequences: the instance's WAITING messages whose `number` is at least `from`,
        /// by number then id, at most `limit` of them, with payload.
        { tx.waiting_numbered(instance, std::int64_t{}, std::size_t{}) } -> std::same_as<std::vector<message_record>>;
        /// Numbered sequences: records that the instance gave its numbers up to `through` up (a
        /// skipped gap), so that last_released_number is at least `through` from now on. Under
        /// the instance lock; a lower number than one recorded before changes nothing.
        { tx.skip_numbers(instance, std::int64_t{}) } -> std::same_as<void>;
        // Optional: `tx.waiting_messages(std::span<const waiting_query>)` ->
        // std::vector<std::vector<message_record>>, the same for many instances in one call
        // (answers in query order); deliver_batch uses it when present.
        { tx.update_message_state(id, state, now) } -> std::same_as<void>;
        /// Stores the state of a delivered message, serialised per key: it holds an exclusive
        /// lock on `row.key()` until commit or rollback, waits while another transaction holds
        /// it, and reads the key's rows after taking it (so it sees rows stored by the previous
        /// holder). Then: a PROCESSED row of the key is left as it is; WAITING rows take a
        /// PROCESSED state (the listener ran), other states leave them; else the newest FAILED
        /// row takes `row`'s state, changed-at time and payload (if it has one); else `row` is
        /// inserted. Why: a state step runs beside the claim transaction, and when that one's
        /// connection dies before the step commits, the delivery taking the claim over and the
        /// step must each find the other's row rather than add a second.
        { tx.store_message(row) } -> std::same_as<stored_as>;
        { tx.close_instance(instance, now) } -> std::same_as<void>;
        /// False once the transaction ended: committed, rolled back, or its connection lost
        /// (also when the loss surfaced in statements the listener ran on it).
        { tx.active() } -> std::convertible_to<bool>;
        { tx.commit() } -> std::same_as<void>;
        { tx.rollback() } -> std::same_as<void>;
    };

/// The claim: one row per key in the claim table, whose primary key arbitrates concurrent
/// deliveries of one message.
template <class T>
concept claim_transaction = requires(T& tx, const claim_request& request, const claim_key& key) {
    /// INSERT ... ON CONFLICT (message_type, idempotence_id) DO NOTHING of `request.key`,
    /// referencing `request.instance`. Lost when a committed claim of the key exists (or this
    /// transaction's own); WAITS while another open transaction holds an uncommitted insert or
    /// delete of the key. Won: then, in this order, it locks the instance as lock_instance does
    /// and reads the key's rows as find_messages does, so that the rows include what the lock's
    /// previous holder stored (a release pass that replayed the key's WAITING row). An instance
    /// that no longer exists throws seqinbox::error(retryable) with SQLSTATE 23503.
    { tx.claim(request) } -> std::same_as<claim_result>;
    /// A DELETE: removes the committed claim (waiting while another transaction deletes it);
    /// another transaction's uncommitted insert is neither seen nor waited for.
    { tx.delete_claim(key) } -> std::same_as<void>;
};

/// The claims of a batch in one operation (basic_inbox::deliver_batch needs it). The keys of
/// `requests` are distinct. Same as claim() on each request, except for the order of the steps:
/// first every claim, in key order (type, then idempotence id); then the instances of the won
/// claims, each locked once, in id order (two batches never wait for each other in a cycle on
/// inbox rows); then, under those locks, the instances' types and the won keys' rows. Results
/// come in the order of `requests`; won results on one instance carry the same lock. A store
/// may do it all in one round trip. An instance that no longer exists throws
/// seqinbox::error(retryable) with SQLSTATE 23503 (which instance is not said); a deadlock the
/// server reports throws seqinbox::error(retryable).
template <class T>
concept batch_claim_transaction = requires(T& tx, std::span<const claim_request> requests) {
    { tx.claim_batch(requests) } -> std::same_as<std::vector<claim_result>>;
};

/// SAVEPOINT and ROLLBACK TO SAVEPOINT: rolling back to a point undoes the writes and releases
/// the locks (claims included) taken after it. Needed only to join the claim transaction.
/// Optional: `tx.release(point)` (RELEASE SAVEPOINT) when the engine is done with a point, so
/// that a batch's savepoints do not nest. A store that defers sending a savepoint and finds
/// then that it could not be created throws that error from rollback_to or release.
template <class T>
concept savepoint_transaction = requires(T& tx) {
    { tx.savepoint() };
    { tx.rollback_to(tx.savepoint()) } -> std::same_as<void>;
};

template <class T>
concept store_transaction = inbox_state_transaction<T> && claim_transaction<T>;

template <class S>
concept store_policy = requires(S& s, typename S::transaction& claim, const std::string& name, timestamp t, const message_record& row) {
    typename S::transaction;
    requires store_transaction<typename S::transaction>;
    { s.begin() } -> std::same_as<typename S::transaction>;
    /// transaction::store_message in a transaction of its own, committed and durable before it
    /// returns (the REQUIRES_NEW state step; a store may do it in one round trip).
    { s.store_message(row) } -> std::same_as<stored_as>;
    /// The same beside the open claim transaction `claim`: committed (visible) before it returns,
    /// durable once `claim` has ended, whether it committed or not. A store may let the claim's
    /// commit make both durable at once.
    { s.store_message_beside(claim, row) } -> std::same_as<stored_as>;
    /// Atomically creates the OPEN instance (name, context id) or returns the existing one;
    /// concurrent calls yield one row and never fail because of each other. A store may answer
    /// from what it read before: the id may then belong to an instance removed meanwhile (the
    /// claim on it fails with SQLSTATE 23503 and the engine asks once more) or, after the server
    /// lost it, to another context's instance (see forget_instance), and the other fields may be
    /// stale.
    { s.create_or_get_instance(name, name, t, t) } -> std::same_as<sequence_instance>;
    /// Drops what the store remembers of instance `id`, so that create_or_get_instance reads it
    /// afresh. After a server crash, a failover or a restore that lost an instance, a remembered
    /// id can name another context's instance: the engine, which verifies the instance it locked,
    /// calls this and claims again.
    { s.forget_instance(instance_id{}) } -> std::same_as<void>;
    // Optional: `s.create_or_get_instances(std::span<const instance_creation>)` ->
    // std::vector<sequence_instance>, create_or_get_instance for many at once (answers in request
    // order); deliver_batch uses it when present.
    // Optional: `s.buffering_problem(const message_record& row)` -> std::string, why the store
    // cannot keep `row` (a WAITING row with its record), e.g. too large for one statement, or "".
    // The delivery then fails (FAILED without its record, error sink, failure_kind::unstorable_key)
    // instead of failing as a delivery, retried forever.
    // Optional: `s.max_batch_records(bool listeners_join)` -> std::size_t, the most records one
    // batch transaction may decide within the server's limits (listeners_join: under
    // propagation::required); deliver_batch splits larger batches into parts of that size.
};

}  // namespace seqinbox
