#pragma once
// Cleanup that survives its test program. A test program that is interrupted (Ctrl-C) or killed
// cannot run the destructor that stops its throwaway server. A watchdog, a shell started with the
// server, reads a pipe only its owner holds; at EOF (the owner closed it or died, whatever the
// cause, SIGKILL included) it runs the server's cleanup script. It ignores the terminal's signals
// and has a process group of its own, so that Ctrl-C does not reach it.
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "support/spawn.hpp"

namespace seqinbox::test {

class watchdog_process {
public:
    watchdog_process() = default;
    watchdog_process(const watchdog_process&) = delete;
    watchdog_process& operator=(const watchdog_process&) = delete;

    /// Ends the watchdog: it runs the cleanup at once, and this waits for it.
    ~watchdog_process() { end(); }

    /// Starts the watchdog, which runs the shell script `cleanup` once the pipe closes. `owner`
    /// names the server in errors (e.g. "pg_server: fork failed").
    void start(const std::string& cleanup, const std::string& owner) {
        int channel[2];
        // Close-on-exec: the servers this process starts later must not hold the pipe open.
        if (::pipe2(channel, O_CLOEXEC) != 0) throw std::runtime_error(owner + ": pipe2 failed");
        spawn_setup setup;
        setup.input = channel[0];
        const pid_t pid = spawn("/bin/sh", {"/bin/sh", "-c", "trap '' INT TERM HUP; cat >/dev/null; " + cleanup}, setup);
        ::close(channel[0]);
        if (pid < 0) {
            ::close(channel[1]);
            throw std::runtime_error(owner + ": fork failed");
        }
        pid_ = pid;
        pipe_ = channel[1];
    }

    /// The watchdog's pid (-1: not started).
    pid_t pid() const noexcept { return pid_; }

    void end() {
        if (pipe_ < 0) return;
        ::close(pipe_);
        pipe_ = -1;
        ::waitpid(pid_, nullptr, 0);
    }

private:
    pid_t pid_ = -1;
    int pipe_ = -1;
};

}  // namespace seqinbox::test
