#pragma once
// The seam between the in-memory store and the step driver: a thread that runs as a driven
// task parks at every store operation until its driver lets it go on. Threads that are not
// driven tasks pass straight through.
#include <condition_variable>
#include <mutex>
#include <string_view>

namespace seqinbox::memory::detail {

enum class task_run { running, parked, blocked, done };

struct task_state {
    std::mutex* mutex = nullptr;  // the driver's; guards every field below
    std::condition_variable* stopped = nullptr;  // the driver's, which only the driver waits on
    std::condition_variable resume;  // this task's own, so that a step wakes only the task it moves
    task_run run = task_run::running;
    bool go = false;
    std::string_view label = "start";
};

inline thread_local task_state* current_task = nullptr;

/// Parks the calling task (if it is one) in state `how` at `label` until its driver resumes it.
inline void park(task_run how, std::string_view label) {
    task_state* task = current_task;
    if (task == nullptr) return;
    std::unique_lock lock(*task->mutex);
    task->run = how;
    task->label = label;
    task->stopped->notify_all();
    task->resume.wait(lock, [task] { return task->go; });
    task->go = false;
    task->run = task_run::running;
}

}  // namespace seqinbox::memory::detail

namespace seqinbox::memory {

/// A named point where a driven task stops before going on; the store calls it before every
/// operation. Listeners in tests may call it too, to stop "inside" the listener.
inline void yield_point(std::string_view label) { detail::park(detail::task_run::parked, label); }

}  // namespace seqinbox::memory
