#pragma once
// The PostgreSQL store's connection pool, as each simulated task sees it (backends/postgresql/
// src/store.cpp): begin() leases a connection until commit, rollback or the transaction's end;
// create_or_get_instance leases one for its call when its cache does not answer; store_message,
// store_message_beside and a listing of pending actions lease one for their call; a
// requires_new step is a transaction of its own. A task gets a pool of its own size (a batch
// worker 1; one delivery at a time 1 under propagation::required, 2 otherwise): asking for more
// while it holds one would, in PostgreSQL, wait for itself until acquire_timeout. That is a
// violation, named after the task's role, with the operation and what the task holds.
//
// Tasks are told apart by the step driver's per-thread task state; only lookups use the map,
// never its order, so a run stays deterministic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/memory/detail/task_hook.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

/// What a task is, for its pool and its messages.
struct task_role {
    std::string name;            ///< "c2 (batch worker)"
    std::size_t pool = 2;        ///< connections it may hold at once
    std::string violation_kind;  ///< how exceeding its pool is reported
    bool batch = false;          ///< decides batches (their parts are checked too)
    std::size_t part_limit = 0;  ///< records one batch transaction may decide (max_batch_records)
};

class connection_pools {
    struct task_state {
        task_role role;
        std::vector<std::pair<std::uint64_t, std::string>> holding;  // lease id, what for
    };

public:
    /// A pooled connection one task holds; given back when released or destroyed.
    class lease {
    public:
        lease() = default;
        lease(connection_pools* pools, const void* task, std::uint64_t id) : pools_(pools), task_(task), id_(id) {}
        lease(lease&& other) noexcept : pools_(std::exchange(other.pools_, nullptr)), task_(other.task_), id_(other.id_) {}
        lease& operator=(lease&& other) noexcept {
            if (this != &other) {
                release();
                pools_ = std::exchange(other.pools_, nullptr);
                task_ = other.task_;
                id_ = other.id_;
            }
            return *this;
        }
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        ~lease() { release(); }

        void release() noexcept {
            if (auto* pools = std::exchange(pools_, nullptr)) pools->give_back(task_, id_);
        }

    private:
        connection_pools* pools_ = nullptr;
        const void* task_ = nullptr;
        std::uint64_t id_ = 0;
    };

    /// The calling task starts in `role`; until it ends, its leases are counted.
    void task_started(task_role role) {
        if (current() != nullptr) tasks_[current()] = {std::move(role), {}};
    }
    void task_ended() { tasks_.erase(current()); }

    /// A connection for `what` on the calling task; a violation when its pool has none left.
    lease acquire(std::string_view what) {
        const auto it = tasks_.find(current());
        if (it == tasks_.end()) return {};
        auto& task = it->second;
        if (!task.holding.empty()) {
            if (task.holding.size() + 1 > task.role.pool) {
                std::string held;
                for (const auto& h : task.holding) held += (held.empty() ? "" : ", ") + h.second;
                found_.push_back({task.role.violation_kind,
                                  task.role.name + ": " + std::string(what) + " needs another pooled connection while it holds " +
                                      std::to_string(task.holding.size()) + " of its " + std::to_string(task.role.pool) + " (" + held +
                                      "); PostgreSQL would wait for itself until acquire_timeout"});
            } else {
                ++second_leases_;
            }
        }
        task.holding.emplace_back(++next_id_, std::string(what));
        return {this, it->first, next_id_};
    }

    /// The calling task's role, if it has one.
    const task_role* role() const {
        const auto it = tasks_.find(current());
        return it == tasks_.end() ? nullptr : &it->second.role;
    }

    /// A violation the calling task's operations showed (kind, text).
    void report(std::string kind, std::string text) { found_.push_back({std::move(kind), std::move(text)}); }

    /// The violations found since the last call.
    std::vector<std::pair<std::string, std::string>> take_violations() { return std::exchange(found_, {}); }
    /// Leases of a second connection beside one held, within the pool (REQUIRES_NEW steps).
    std::size_t second_leases() const noexcept { return second_leases_; }

private:
    static const void* current() { return memory::detail::current_task; }

    void give_back(const void* task, std::uint64_t id) noexcept {
        const auto it = tasks_.find(task);
        if (it == tasks_.end()) return;
        std::erase_if(it->second.holding, [&](const auto& h) { return h.first == id; });
    }

    std::map<const void*, task_state> tasks_;
    std::vector<std::pair<std::string, std::string>> found_;
    std::uint64_t next_id_ = 0;
    std::size_t second_leases_ = 0;
};

}  // namespace seqinbox::sim
