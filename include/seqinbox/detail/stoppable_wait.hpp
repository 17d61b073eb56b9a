#pragma once
// A wait that a stop request ends early: the pauses of the housekeeper's pace and of the relay's
// job schedule, so that a stop never waits out a pause.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

namespace seqinbox::detail {

/// Waits `duration`, or less once `stop` is requested; true when it was.
template <class Rep, class Period>
bool wait_unless_stopped(std::chrono::duration<Rep, Period> duration, const std::stop_token& stop) {
    std::mutex mutex;  // the wait's own: only the stop request wakes it
    std::condition_variable_any woken;
    std::unique_lock lock(mutex);
    return woken.wait_for(lock, stop, duration, [&stop] { return stop.stop_requested(); });
}

}  // namespace seqinbox::detail
