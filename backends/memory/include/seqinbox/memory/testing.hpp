#pragma once
// Test hooks of the in-memory store: what tests and the step driver do to a store that no user
// of the store does (a server crash, lost connections, a DELETE behind the inbox's back) and what
// only they inspect.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/memory/detail/task_hook.hpp"
#include "seqinbox/memory/store.hpp"

namespace seqinbox::memory {

/// The hooks, as static functions over a store (a friend of it).
struct testing {
    // ---- the durability model (see store.hpp) ----
    /// Commits that did not wait for their WAL flush and that no later flush covered yet.
    static std::size_t unflushed_commits(const store& s);
    /// WAL flushes so far (a commit that waits for its flush, or an explicit flush).
    static std::size_t wal_flushes(const store& s);

    /// A server crash and restart: the committed state rolls back to what was flushed plus the
    /// first `keep` of the unflushed commits after it (the WAL writer flushes in the background
    /// at any moment), id sequences with it; every open transaction dies as with a lost
    /// connection. What lives in the processes (caches, job locks) is left as it is.
    static void crash(store& s, std::size_t keep);

    // ---- lost connections (step_driver) ----
    /// Rolls back every open transaction begun by `task` and makes later calls on them fail
    /// with a connection error, as pg_terminate_backend does to a backend.
    static void lose_connections_of(store& s, const detail::task_state* task);

    /// Like lose_connections_of, for the task's oldest open transaction only (its claim
    /// transaction): a REQUIRES_NEW step in flight lives on, as when one backend is terminated.
    static void lose_first_connection_of(store& s, const detail::task_state* task);

    /// The instances locked by the open transactions `task` began (which instance an action
    /// runner is acting on).
    static std::vector<instance_id> instances_locked_by(const store& s, const detail::task_state* task);

    // ---- server limits ----
    /// The next savepoint, stored message or commit of every open transaction `task` began fails
    /// with SQLSTATE 53200, as when the server's lock table is full, and aborts it. Returns how
    /// many transactions were armed.
    static std::size_t exhaust_lock_table(store& s, const detail::task_state* task);
    /// Operations refused so far because their transaction was over store_options::lock_entries.
    static std::size_t lock_table_exhausted(const store& s);

    // ---- around the inbox ----
    /// Deletes an instance with its messages and claims (ON DELETE CASCADE), committed at once.
    /// Waits like a DELETE would while another transaction locks the instance.
    static void delete_instance(store& s, instance_id id);

    // ---- committed state only tests inspect ----
    /// Whether the claim of `key` is committed.
    static bool has_claim(const store& s, const claim_key& key);

    /// Claim keys the store keeps a slot for: claimed, held or waited for by a transaction, or
    /// with message rows. A key none of these refers to any more costs nothing.
    static std::size_t claim_slots(const store& s);

    /// The committed value of the business key-value table (transaction::put).
    static std::optional<std::string> kv_get(const store& s, const std::string& key);
};

}  // namespace seqinbox::memory
