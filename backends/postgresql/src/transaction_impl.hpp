#pragma once
// Private to seqinbox::postgresql: the state of a store transaction (store::transaction::impl):
// its round trips, the writes it defers (deferred_writes.hpp) and their flush, commit and
// rollback, savepoints. Shared by the parts that run in a transaction or begin one: store.cpp
// (begin, the ways to a connection), transaction.cpp, claims.cpp, instances.cpp, messages.cpp.
#include <algorithm>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deferred_writes.hpp"
#include "pipeline.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "statements.hpp"

namespace seqinbox::postgresql {

class store::transaction::impl {
public:
    impl(std::shared_ptr<detail::pool> pool, detail::lease conn) : pool_(std::move(pool)), conn_(std::move(conn)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    ~impl() { end_quietly(); }

    bool active() const noexcept { return !ended_ && operator->()->connected(); }

    /// A statement failed in the transaction and PostgreSQL ignores everything until a rollback.
    bool aborted() const noexcept { return !ended_ && (aborted_ || (begun_ && in_failed_transaction())); }

    /// Drops `instance` from the store's instance cache and says it is gone: a retryable error.
    [[noreturn]] void instance_removed(instance_id instance, std::string sqlstate = {}) {
        pool_->instances().forget(instance);
        throw error(error_category::retryable,
                    "sequence instance " + std::to_string(instance) + " no longer exists (removed meanwhile); retry the delivery",
                    std::move(sqlstate));
    }

    /// The same for a batch's claims, of which one named a removed instance (which one PostgreSQL
    /// does not say): every instance of the batch is forgotten.
    [[noreturn]] void instances_removed(std::span<const claim_request> requests, std::string sqlstate = {}) {
        std::string ids;
        for (const auto& r : requests) {
            pool_->instances().forget(r.instance);
            ids += (ids.empty() ? "" : ", ") + std::to_string(r.instance);
        }
        throw error(error_category::retryable,
                    "a sequence instance of the batch (one of " + ids + ") no longer exists (removed meanwhile); retry the batch",
                    std::move(sqlstate));
    }

    /// Runs `op` on the connection as one round trip; a SOCI failure becomes seqinbox::error and
    /// ends the transaction when the connection is lost, aborts it otherwise.
    template <class Op>
    decltype(auto) guarded(std::string_view doing, Op&& op) {
        require_active();
        try {
            conn_->count_round_trip();
            return op(*operator->());
        } catch (const soci::soci_error& e) {
            try {
                detail::fail(*operator->(), e, doing, conninfo());
            } catch (const error& failure) {
                if (failure.category() == error_category::connection) finish();
                else aborted_ = true;
                throw;
            }
        }
    }

    /// Like guarded, inside the transaction with every deferred write sent first.
    template <class Op>
    decltype(auto) read(std::string_view doing, Op&& op) {
        begin_if_needed();
        flush();
        return guarded(doing, std::forward<Op>(op));
    }

    /// Sends the statements `queue(batch)` adds in one round trip, inside the transaction: after
    /// BEGIN when it has not begun, and after the deferred writes. Returns their results.
    template <class Queue>
    std::vector<detail::result> batch(std::string_view doing, Queue&& queue) {
        if (!std::ranges::all_of(pending_, detail::batchable)) {
            begin_if_needed();
            flush();
        }
        const auto writes = std::exchange(pending_, {});
        return sending(writes, [&] {
            return guarded(doing, [&](detail::connection& c) {
                auto statements = c.batch();
                if (!begun_) statements.statement(detail::begin_sql(), {});
                begun_ = true;  // also when the batch fails: rollback() then ends the transaction
                detail::queue_writes(statements, writes);
                queue(statements);
                return statements.run();
            });
        });
    }

    void defer(detail::deferred_write write) {
        require_active();
        pending_.push_back(std::move(write));
    }

    void commit() {
        require_active();
        if (!begun_ && pending_.size() <= 1 && open_.empty()) {  // one write is atomic on its own: no BEGIN/COMMIT
            if (!pending_.empty()) send(pending_.front());
            finish();
            return;
        }
        if (aborted_ || (begun_ && in_failed_transaction())) {
            end_quietly();
            throw error(error_category::misuse,
                        "commit after a failed statement: PostgreSQL rolled the transaction back and nothing was saved");
        }
        try {
            batch("committing", [&](detail::pipeline& statements) { statements.statement(detail::commit_sql(), {}); });
        } catch (const error& e) {
            // Committed or not, the steps beside it must not wait for the WAL writer (other
            // failures leave the transaction to rollback(), which flushes).
            if (e.category() == error_category::connection) unless_connection_lost([&] { flush_steps_beside(); });
            throw;
        }
        if (!claim_won_) flush_steps_beside();  // else its commit wrote WAL after theirs and waited for the flush
        finish();
    }

    void rollback() {
        if (ended_) return;
        pending_.clear();
        // A lost connection: the server rolled back, or it is gone with whatever it did not flush.
        if (begun_) unless_connection_lost([&] { guarded("rolling back", [](detail::connection& c) { c.session().rollback(); }); });
        unless_connection_lost([&] { flush_steps_beside(); });
        finish();
    }

    // A savepoint is deferred like a write: it reaches the server with the next round trip (the
    // listener's first statement, through session()), or never when a release follows at once.
    // Should that round trip fail, the savepoint does not exist: releasing or rolling back to it
    // rethrows that failure, so a store error is never taken for the listener's.
    store::savepoint_id savepoint() {
        require_active();
        const auto point = ++savepoints_;
        open_.push_back(point);
        pending_.push_back(detail::savepoint_taking{point, open_.size()});
        return point;
    }

    void rollback_to(store::savepoint_id point) {
        const std::size_t depth = depth_of(point);
        unstored_.clear();  // claims after `point` are undone: from now on store_message asks the server
        open_.resize(depth);  // later savepoints end; this one stays, as in SQL
        if (const auto unsent = unsent_savepoint(point); unsent != pending_.end()) {
            pending_.erase(std::next(unsent), pending_.end());  // nothing after it reached the server
            return;
        }
        pending_.clear();  // deferred writes all came after the latest flush, so after `point`
        guarded("rolling back to a savepoint", [&](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::savepoint_sql(detail::savepoint_command::roll_back_to, depth), {});
            statements.run();
        });
        aborted_ = false;
    }

    void release(store::savepoint_id point) {
        const std::size_t depth = depth_of(point);
        open_.resize(depth - 1);
        if (const auto unsent = unsent_savepoint(point); unsent != pending_.end() && std::next(unsent) == pending_.end()) {
            pending_.pop_back();  // nothing was written in its scope
            return;
        }
        defer(detail::savepoint_release{point, depth});
    }

    soci::session& session() {
        begin_if_needed();
        flush();
        return operator->()->session();
    }

    detail::connection* operator->() const { return conn_.operator->(); }

    /// This transaction won the claim of `key`, whose rows it read then: `none` when there were none.
    void claim_won(const claim_key& key, bool rows_found) {
        claim_won_ = true;
        if (!rows_found) unstored_.insert(key);
    }
    /// Whether store_message of `key` may be deferred, its outcome known: this transaction holds
    /// the key's claim and no row of it exists but what this transaction wrote, which is nothing.
    bool take_unstored(const claim_key& key) { return unstored_.erase(key) == 1; }
    void claim_deleted(const claim_key& key) { unstored_.erase(key); }
    /// A state step beside this transaction committed without waiting for its WAL flush.
    void step_beside_unflushed() noexcept { steps_beside_unflushed_ = true; }

private:
    /// The depth of open savepoint `point`; rethrows the failure of the round trip that was to
    /// create it.
    std::size_t depth_of(store::savepoint_id point) {
        if (const auto failed = never_created_.find(point); failed != never_created_.end()) std::rethrow_exception(failed->second);
        require_active();
        const auto at = std::ranges::find(open_, point);
        if (at == open_.end()) throw error(error_category::misuse, "savepoint " + std::to_string(point) + " is not open in this transaction");
        return static_cast<std::size_t>(at - open_.begin()) + 1;
    }

    std::vector<detail::deferred_write>::iterator unsent_savepoint(store::savepoint_id point) {
        return std::ranges::find_if(pending_, [&](const detail::deferred_write& w) {
            const auto* taking = std::get_if<detail::savepoint_taking>(&w);
            return taking != nullptr && taking->point == point;
        });
    }

    /// Runs `send(writes)`; when it fails, the savepoints among `writes` were never created.
    template <class Send>
    decltype(auto) sending(const std::vector<detail::deferred_write>& writes, Send&& send) {
        try {
            return send();
        } catch (...) {
            for (const auto& w : writes)
                if (const auto* taking = std::get_if<detail::savepoint_taking>(&w)) never_created_.emplace(taking->point, std::current_exception());
            throw;
        }
    }

    void require_active() const {
        if (ended_) throw error(error_category::misuse, "use of a PostgreSQL store transaction that has ended");
    }

    const std::string& conninfo() const { return pool_->options().conninfo; }

    void begin_if_needed() {
        if (begun_) return;
        guarded("starting a transaction", [](detail::connection& c) {  // a pipeline: it carries local settings
            auto statements = c.batch();
            statements.statement(detail::begin_sql(), {});
            statements.run();
        });
        begun_ = true;
    }

    template <class Op>
    static void unless_connection_lost(Op&& op) {
        try {
            op();
        } catch (const error& e) {
            if (e.category() != error_category::connection) throw;
        }
    }

    /// Makes the state steps committed beside this transaction durable, when its own commit does
    /// not: on its connection, or on another when that one is lost.
    void flush_steps_beside() {
        if (!std::exchange(steps_beside_unflushed_, false)) return;
        const auto run = [](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::wal_flush_sql(), {});
            statements.run();
        };
        if (!ended_ && operator->()->connected()) return guarded("flushing the WAL of a state step", run);
        impl other(pool_, pool_->acquire());
        other.guarded("flushing the WAL of a state step", run);
    }

    /// The deferred writes in one round trip when they can travel together, else one by one.
    void flush() {
        if (pending_.empty()) return;
        if (std::ranges::all_of(pending_, detail::batchable)) {
            batch("sending deferred writes", [](detail::pipeline&) {});
            return;
        }
        auto writes = std::exchange(pending_, {});
        sending(writes, [&] {
            for (const auto& w : writes) send(w);
        });
    }

    void send(const detail::deferred_write& w) {
        guarded(detail::describe(w), [&](detail::connection& c) { detail::execute(c, w); });
    }

    bool in_failed_transaction() const { return operator->()->in_failed_transaction(); }

    void finish() noexcept {
        ended_ = true;
        pending_.clear();
        conn_.release();
    }

    void end_quietly() noexcept {
        try {
            rollback();
        } catch (...) {
            if (conn_) operator->()->mark_broken();
            finish();
        }
    }

    std::shared_ptr<detail::pool> pool_;
    detail::lease conn_;
    bool begun_ = false;
    bool ended_ = false;
    bool aborted_ = false;
    bool claim_won_ = false;  ///< its commit writes WAL, so it waits for the flush (synchronous_commit)
    bool steps_beside_unflushed_ = false;
    store::savepoint_id savepoints_ = 0;
    std::vector<store::savepoint_id> open_;  ///< savepoints created or deferred, not released, outermost first
    std::map<store::savepoint_id, std::exception_ptr> never_created_;  ///< their round trip failed
    std::vector<detail::deferred_write> pending_;
    std::set<claim_key> unstored_;  ///< won claims of keys without rows, none stored since
};

namespace detail {

template <class Impl>
Impl& checked(const std::unique_ptr<Impl>& state) {
    if (!state) throw error(error_category::misuse, "use of a moved-from PostgreSQL store transaction");
    return *state;
}

}  // namespace detail

}  // namespace seqinbox::postgresql
