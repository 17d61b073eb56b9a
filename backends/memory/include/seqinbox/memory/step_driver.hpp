#pragma once
// Drives concurrent deliveries one step at a time from a single controlling thread.
//
// Each task runs on its own thread, but only while the controller lets it: it parks before every
// store operation (and at every yield_point a listener calls). The controller decides who moves,
// who commits, rolls back or loses its connection, and when. Exactly one thread runs at any time,
// so a scenario is deterministic. A task blocked on a lock is reported as `blocked`; stepping it
// lets it re-check and, if still blocked, it parks again.
//
// Not thread-safe: call it from one controlling thread only.
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/memory/detail/task_hook.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"

namespace seqinbox::memory {

enum class task_status { parked, blocked, finished, failed };

class step_driver {
    struct task {
        std::string name;
        detail::task_state state;
        std::exception_ptr failure;
        std::thread thread;
    };

public:
    using task_id = std::size_t;

    explicit step_driver(store& s) : store_(&s) {}
    step_driver(const step_driver&) = delete;
    step_driver& operator=(const step_driver&) = delete;

    /// Ends every unfinished task: its connections are lost, then it runs to its end.
    ~step_driver() {
        for (task_id id = 0; id < tasks_.size(); ++id) {
            if (!done(id)) lose_connection(id);
            for (int i = 0; i < 100'000 && !done(id); ++i) step(id);
            if (tasks_[id]->thread.joinable()) tasks_[id]->thread.join();
        }
    }

    /// Starts `body` on a new task and runs it up to its first yield point.
    task_id spawn(std::string name, std::function<void()> body) {
        auto t = std::make_unique<task>();
        t->name = std::move(name);
        t->state.mutex = &mutex_;
        t->state.stopped = &cv_;
        task* raw = t.get();
        tasks_.push_back(std::move(t));
        raw->thread = std::thread([raw, body = std::move(body)] {
            detail::current_task = &raw->state;
            try {
                body();
            } catch (...) {
                raw->failure = std::current_exception();
            }
            detail::current_task = nullptr;
            std::lock_guard lock(*raw->state.mutex);
            raw->state.run = detail::task_run::done;
            raw->state.stopped->notify_all();
        });
        wait_until_stopped(*raw);
        return tasks_.size() - 1;
    }

    /// Lets the task run to its next yield point (or to its end).
    task_status step(task_id id) {
        task& t = at(id);
        {
            std::unique_lock lock(mutex_);
            if (t.state.run == detail::task_run::done) return status_locked(t);
            t.state.go = true;
            t.state.resume.notify_one();
        }
        wait_until_stopped(t);
        return status(id);
    }

    /// Steps the task until it stops at `label` (parked before that operation, or blocked in it),
    /// or ends. Throws misuse if it is blocked elsewhere or does not get there within `max_steps`.
    task_status run_until(task_id id, std::string_view label, int max_steps = 10'000) {
        for (int i = 0; i < max_steps; ++i) {
            auto s = status(id);
            if (s == task_status::finished || s == task_status::failed) return s;
            if (position(id) == label) return s;
            if (s == task_status::blocked && i > 0)
                throw error(error_category::misuse, "task '" + at(id).name + "' is blocked at " +
                                                        std::string(position(id)) + " and cannot reach " + std::string(label));
            step(id);
        }
        throw error(error_category::misuse, "task '" + at(id).name + "' did not reach " + std::string(label));
    }

    /// Steps the task to its end. Throws misuse if it stays blocked.
    task_status finish(task_id id, int max_steps = 100'000) {
        for (int i = 0; i < max_steps && !done(id); ++i) {
            if (step(id) == task_status::blocked && step(id) == task_status::blocked)
                throw error(error_category::misuse,
                            "task '" + at(id).name + "' is blocked at " + std::string(position(id)));
        }
        return status(id);
    }

    /// The task's open transactions are rolled back; its next store call on them fails.
    void lose_connection(task_id id) { testing::lose_connections_of(*store_, &at(id).state); }
    /// Only the connection of the task's oldest open transaction (its claim transaction) dies.
    void lose_claim_connection(task_id id) { testing::lose_first_connection_of(*store_, &at(id).state); }

    /// The task's open transactions find the lock table full at their next savepoint, stored
    /// message or commit (testing::exhaust_lock_table); how many were armed.
    std::size_t exhaust_lock_table(task_id id) { return testing::exhaust_lock_table(*store_, &at(id).state); }

    /// The instances the task's open transactions lock.
    std::vector<instance_id> locked_instances(task_id id) const { return testing::instances_locked_by(*store_, &at(id).state); }

    task_status status(task_id id) const {
        std::lock_guard lock(mutex_);
        return status_locked(*tasks_.at(id));
    }
    bool done(task_id id) const {
        auto s = status(id);
        return s == task_status::finished || s == task_status::failed;
    }
    /// Where the task is parked or blocked: the label of the operation it is about to run.
    std::string_view position(task_id id) const {
        std::lock_guard lock(mutex_);
        return tasks_.at(id)->state.label;
    }
    /// The exception that ended a failed task.
    std::exception_ptr failure(task_id id) const { return tasks_.at(id)->failure; }
    std::size_t size() const noexcept { return tasks_.size(); }

private:
    task& at(task_id id) {
        if (id >= tasks_.size()) throw error(error_category::misuse, "no task " + std::to_string(id));
        return *tasks_[id];
    }
    const task& at(task_id id) const { return *tasks_.at(id); }

    task_status status_locked(const task& t) const {
        switch (t.state.run) {
        case detail::task_run::parked: return task_status::parked;
        case detail::task_run::blocked: return task_status::blocked;
        case detail::task_run::done: return t.failure ? task_status::failed : task_status::finished;
        case detail::task_run::running: break;
        }
        return task_status::parked;
    }

    void wait_until_stopped(task& t) {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !t.state.go && t.state.run != detail::task_run::running; });
        if (t.state.run == detail::task_run::done && t.thread.joinable()) {
            lock.unlock();
            t.thread.join();
        }
    }

    store* store_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<task>> tasks_;
};

}  // namespace seqinbox::memory
