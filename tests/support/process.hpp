#pragma once
// A process seen from outside, as the throwaway servers of the tests need it: whether it still
// runs, its pid in a pid file, and stopping it with a signal, then SIGKILL if it lingers.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/wait_until.hpp"

namespace seqinbox::test {

/// True while process `pid` exists and is not a zombie (a container's init may never reap an
/// orphaned server).
inline bool process_alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return ::kill(pid, 0) == 0;
    const auto paren = line.rfind(')');
    return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

/// The first number in `pid_file` (0: no file, or no number).
inline pid_t pid_in_file(const std::filesystem::path& pid_file) {
    std::ifstream in(pid_file);
    pid_t pid = 0;
    return in >> pid && pid > 0 ? pid : 0;
}

/// Sends `signal` to `pid` if it runs, waits up to `patience` for it to end, then SIGKILLs it if
/// it has not. A pid file outlives a killed server: a pid that no longer runs is left alone.
inline void stop_process(pid_t pid, int signal, std::chrono::milliseconds patience) {
    if (pid <= 0 || !process_alive(pid)) return;  // kill(0 or -1, ...) would signal a whole group
    ::kill(pid, signal);
    if (!wait_until([&] { return !process_alive(pid); }, patience, std::chrono::milliseconds(10))) ::kill(pid, SIGKILL);
}

}  // namespace seqinbox::test
