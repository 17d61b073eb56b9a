#pragma once
// Polling with a deadline: what a test waits for when nothing announces it (a server accepting
// connections, a process gone, a failover done).
#include <chrono>
#include <functional>
#include <thread>

namespace seqinbox::test {

/// Calls `done` every `step` until it returns true (then true) or `patience` has passed (false).
inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds patience,
                       std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(step);
    }
    return true;
}

}  // namespace seqinbox::test
