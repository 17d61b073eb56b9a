#pragma once
// A `seqinbox run` child process for the relay tests: started with arguments, its stdout and
// stderr in a log file, stopped with a signal, killed and reaped by the destructor if still
// running; wait_for_log() for a line. http_client.hpp GETs from its loopback endpoint.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "relay/http_client.hpp"

namespace seqinbox::test {

class relay_process {
public:
    relay_process(const std::vector<std::string>& arguments, std::filesystem::path log_file) : log_file_(std::move(log_file)) {
        std::vector<std::string> argv_strings{SEQINBOX_CLI, "run"};
        argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
        std::vector<char*> argv;
        for (auto& a : argv_strings) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
            const int fd = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~relay_process() {
        if (pid_ > 0 && !exit_code_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    relay_process(const relay_process&) = delete;
    relay_process& operator=(const relay_process&) = delete;

    /// Sends `signal` and waits for the exit; the exit code, or 128 + signal if a signal ended it
    /// (-1: it did not end within `patience`).
    int stop(int signal = SIGTERM, std::chrono::seconds patience = std::chrono::seconds(60)) {
        ::kill(pid_, signal);
        return wait(patience);
    }

    /// Waits for the exit without a signal (see stop()).
    int wait(std::chrono::seconds patience) {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (!exit_code_ && std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_)
                exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            else
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return exit_code_.value_or(-1);
    }

    std::string log() const {
        std::ifstream in(log_file_);
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }

    /// The port of /metrics and /healthz, read from the start line of the log (0: not started
    /// within `patience`, or exited).
    std::uint16_t http_port(std::chrono::seconds patience = std::chrono::seconds(60)) {
        static const std::string marker = "on 127.0.0.1:";
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (std::chrono::steady_clock::now() < deadline && wait(std::chrono::seconds(0)) == -1) {
            const auto text = log();
            if (const auto at = text.find(marker); at != std::string::npos)
                return static_cast<std::uint16_t>(std::stoi(text.substr(at + marker.size())));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return 0;
    }

    pid_t pid() const noexcept { return pid_; }

private:
    std::filesystem::path log_file_;
    pid_t pid_ = -1;
    std::optional<int> exit_code_;
};

/// Waits until the log of `relay` contains `text`.
inline bool wait_for_log(const relay_process& relay, const std::string& text, std::chrono::seconds patience = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (relay.log().find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return relay.log().find(text) != std::string::npos;
}

}  // namespace seqinbox::test
