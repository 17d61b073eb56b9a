#pragma once
// One simulated process's handle on the shared in-memory store, with what a process keeps across
// a database crash: an instance cache like the PostgreSQL store's (backends/postgresql/src/
// instance_cache.hpp). create_or_get_instance answers from it for a (sequence, context) it
// created or read before; a claim or lock on an instance that no longer exists forgets the entry
// (as the PostgreSQL store does on SQLSTATE 23503), forget_instance forgets one, and a lost
// connection of the process clears it. After a crash the id sequences roll back, so an entry may
// name an id that now belongs to another context's instance: the engine must verify the
// instance it locked (defect 1 of issue 17).
//
// The planted defect `instance_cache_after_crash` (planted.hpp) puts defect 1 back: the cache
// outlives lost connections, and a claim's or lock_instance's locked row reports the sequence and context the cache
// believed, as the engine effectively did before it verified the locked row.
//
// The handle also counts the pooled connections each task holds (connection_pool.hpp), checks
// that no batch transaction claims the keys of more records than the store's max_batch_records
// (`batch_part_over_limit`), and counts the batch transactions that committed (their parts). The
// planted defect `batch_instances_in_transaction` puts defect 1 of issue 33 back: a batch
// worker's BEGIN is followed by the resolution of the batch's instances on a second connection,
// as the engine before commit 40140ee did (create_or_get_instances leased one whatever its cache
// knew).
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "connection_pool.hpp"
#include "planted.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::sim {

template <class Store>
class process_store {
    static constexpr bool planted = planted_instance_cache<Store>;
    static constexpr bool late_instances = planted_late_instances<Store>;

public:
    class transaction : public Store::transaction {
    public:
        transaction(typename Store::transaction&& tx, process_store& owner, connection_pools::lease lease)
            : Store::transaction(std::move(tx)), owner_(&owner), lease_(std::move(lease)) {}

        /// The connection goes back to the pool once the commit succeeded (a failed one keeps it
        /// until the rollback, as the PostgreSQL store does).
        void commit() {
            Store::transaction::commit();
            owner_->committed_ = true;
            lease_.release();
            if (const auto* role = owner_->pools_.role(); role && role->batch) ++owner_->batch_parts_;
        }
        void rollback() {
            Store::transaction::rollback();
            lease_.release();
        }

        claim_result claim(const claim_request& request) {
            claim_result result = owner_->forgetting_if_removed({request.instance}, [&] { return Store::transaction::claim(request); });
            if (result.won) owner_->believed(result.locked.row);
            return result;
        }

        /// Which instance was removed is not said: every one of the batch is forgotten then.
        std::vector<claim_result> claim_batch(std::span<const claim_request> requests) {
            std::vector<instance_id> instances;
            for (const auto& request : requests) instances.push_back(request.instance);
            count_part(requests);
            auto results = owner_->forgetting_if_removed(instances, [&] { return Store::transaction::claim_batch(requests); });
            for (auto& result : results)
                if (result.won) owner_->believed(result.locked.row);
            return results;
        }

        instance_lock lock_instance(instance_id instance) {
            instance_lock locked = owner_->forgetting_if_removed({instance}, [&] { return Store::transaction::lock_instance(instance); });
            owner_->believed(locked.row);
            return locked;
        }

    private:
        /// A batch transaction claims the keys of its part's records (later rounds claim some of
        /// them again): more keys than max_batch_records allows is a part too large.
        void count_part(std::span<const claim_request> requests) {
            const auto* role = owner_->pools_.role();
            if (role == nullptr || !role->batch) return;
            for (const auto& request : requests) keys_.insert(request.key);
            if (keys_.size() > role->part_limit && !reported_)
                owner_->pools_.report("batch_part_over_limit", role->name + ": one batch transaction claimed " + std::to_string(keys_.size()) +
                                                                   " keys, more than the " + std::to_string(role->part_limit) +
                                                                   " records the store's max_batch_records allows");
            reported_ = reported_ || keys_.size() > role->part_limit;
        }

        process_store* owner_;
        connection_pools::lease lease_;  // held from begin() to commit, rollback or destruction
        std::set<claim_key> keys_;       // claimed in this transaction, in a batch
        bool reported_ = false;
    };

    explicit process_store(Store& shared) : shared_(&shared) {}
    process_store(const process_store&) = delete;
    process_store& operator=(const process_store&) = delete;

    transaction begin() {
        auto lease = pools_.acquire("begin (a transaction)");
        transaction tx(shared_->begin(), *this, std::move(lease));
        if constexpr (late_instances) resolve_after_begin();
        return tx;
    }

    sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id, timestamp created_at,
                                             timestamp retain_until) {
        if constexpr (late_instances)
            if (const auto* role = pools_.role(); role && role->batch) resolved_.push_back({sequence, context_id, created_at, retain_until});
        if (auto known = cache_.find({sequence, context_id}); known != cache_.end()) return answered(known->second);
        const auto lease = pools_.acquire("create_or_get_instance (" + sequence + ", " + context_id + ")");
        committed_ = true;  // it may have created the instance
        return answered(remember(shared_->create_or_get_instance(sequence, context_id, created_at, retain_until)));
    }

    /// The calling task starts (or ends) in `role`: its pool and its batch transactions' limit.
    void task_started(task_role role) { pools_.task_started(std::move(role)); }
    void task_ended() { pools_.task_ended(); }
    /// What the calling task's operations violated since the last call (kind, text).
    std::vector<std::pair<std::string, std::string>> take_violations() { return pools_.take_violations(); }
    std::size_t second_leases() const noexcept { return pools_.second_leases(); }
    std::size_t batch_parts() const noexcept { return batch_parts_; }

    std::size_t max_batch_records(bool listeners_join) const { return shared_->max_batch_records(listeners_join); }

    void forget_instance(instance_id id) {
        std::erase_if(cache_, [&](const auto& entry) { return entry.second.id == id; });
    }

    /// One of the process's tasks saw its connection die: the cache is cleared, as the PostgreSQL
    /// store does when a statement finds its connection lost. Another task may have answered
    /// from the cache in between, and one that held no transaction sees nothing.
    void connection_lost() {
        if constexpr (!planted) cache_.clear();
    }

    /// Locks of an instance whose row was not the (sequence, context) the cache had for its id.
    std::size_t stale_locks() const noexcept { return stale_locks_; }

    stored_as store_message(message_record row) {
        const auto lease = pools_.acquire("store_message (a state step of its own)");
        committed_ = true;
        return shared_->store_message(std::move(row));
    }
    /// A WAITING row committed after its claim transaction died was stored outside the instance
    /// lock (store/concept.hpp, lock_instance): the buffer bound's check excuses it (buffer_checks.hpp).
    stored_as store_message_beside(transaction& claim, message_record row) {
        const auto lease = pools_.acquire("store_message_beside (the state step beside the claim transaction)");
        const bool waiting = row.state == message_state::waiting;
        const claim_key key = row.key();
        const stored_as what = shared_->store_message_beside(claim, std::move(row));
        committed_ = true;
        if (waiting && !claim.active() && what != stored_as::left_existing) orphaned_waiting_.push_back(key);
        return what;
    }
    /// Whether the process may have committed anything since the last call (the buffer checks
    /// look at the store then: a step with no commit changes no committed row).
    bool take_committed() { return std::exchange(committed_, false); }
    /// The keys of such rows since the last call.
    std::vector<claim_key> take_orphaned_waiting() { return std::exchange(orphaned_waiting_, {}); }

    request_outcome request_message_action(message_id id, message_action action, timestamp now) { return shared_->request_message_action(id, action, now); }
    request_outcome request_instance_action(instance_id id, instance_action action, timestamp now) { return shared_->request_instance_action(id, action, now); }
    std::vector<instance_id> instances_with_pending_actions(std::size_t limit) const {
        const auto lease = pools_.acquire("instances_with_pending_actions");
        return shared_->instances_with_pending_actions(limit);
    }

    /// The housekeeping store's operations, for the gap-timeout job of an action runner (each on
    /// a pooled connection of the calling task, as the PostgreSQL store's).
    using job_lock = typename Store::job_lock;
    job_lock try_lock_job(const std::string& job) { return leased("try_lock_job", [&] { return shared_->try_lock_job(job); }); }
    std::vector<instance_id> closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit, scan_position& after) {
        return leased("closed_instances", [&] { return shared_->closed_instances(now, windows, limit, after); });
    }
    std::vector<sequence_instance> mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit, scan_position& after) {
        return leased("mark_expired", [&] { return shared_->mark_expired(now, delay, limit, after); });
    }
    std::vector<instance_id> removable_instances(timestamp now, std::size_t limit, scan_position& after) {
        return leased("removable_instances", [&] { return shared_->removable_instances(now, limit, after); });
    }
    std::size_t remove_instances(std::span<const instance_id> ids, const removal_condition& condition, const forward_waiting& forward) {
        return leased("remove_instances", [&] { return shared_->remove_instances(ids, condition, forward); });
    }
    std::vector<instance_id> stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after) {
        return leased("stalled_numbered", [&] { return shared_->stalled_numbered(sequence, now, limit, after); });
    }

private:
    template <class Op>
    auto leased(const char* what, Op op) {
        const auto lease = pools_.acquire(what);
        return op();
    }

    template <class Op>
    auto forgetting_if_removed(const std::vector<instance_id>& instances, Op op) {
        try {
            return op();
        } catch (const error& e) {
            if (e.sqlstate() == instance_removed_sqlstate)
                for (instance_id instance : instances) forget_instance(instance);
            throw;
        }
    }

    const sequence_instance& remember(const sequence_instance& row) {
        forget_instance(row.id);  // an entry of another context with this id is stale (as instance_cache::remember)
        return cache_.insert_or_assign({row.sequence, row.context_id}, row).first->second;
    }

    /// The planted defect: the instances the batch worker resolved before BEGIN, read again on a
    /// second connection after it, uncached.
    void resolve_after_begin() {
        const auto* role = pools_.role();
        if (role == nullptr || !role->batch || resolved_.empty()) return;
        const auto lease = pools_.acquire("create_or_get_instances (the batch's instances, after BEGIN)");
        for (const auto& r : std::exchange(resolved_, {}))
            remember(shared_->create_or_get_instance(r.sequence, r.context_id, r.created_at, r.retain_until));
    }

    const sequence_instance& answered(const sequence_instance& row) {
        answers_.insert_or_assign(row.id, std::pair{row.sequence, row.context_id});
        return row;
    }

    /// Counts a locked row that is not the (sequence, context) the process last answered for its
    /// id; the planted defect makes the row say what was answered.
    void believed(sequence_instance& row) {
        const auto answer = answers_.find(row.id);
        if (answer == answers_.end() || answer->second == std::pair{row.sequence, row.context_id}) return;
        ++stale_locks_;
        if constexpr (planted) std::tie(row.sequence, row.context_id) = answer->second;
    }

    Store* shared_;
    mutable connection_pools pools_;  // a listing of pending actions leases one too
    std::vector<claim_key> orphaned_waiting_;  // see store_message_beside
    bool committed_ = false;                   // see take_committed
    std::vector<instance_creation> resolved_;  // the planted defect's: since the batch worker's last BEGIN
    std::size_t batch_parts_ = 0;
    std::size_t stale_locks_ = 0;
    std::map<instance_id, std::pair<std::string, std::string>> answers_;  // by id: the (sequence, context) last answered
    std::map<std::pair<std::string, std::string>, sequence_instance> cache_;  // by (sequence, context id)
};

static_assert(action_store<process_store<memory::store>>);
static_assert(housekeeping_store<process_store<memory::store>>);
static_assert(batch_claim_transaction<process_store<memory::store>::transaction>);

}  // namespace seqinbox::sim
