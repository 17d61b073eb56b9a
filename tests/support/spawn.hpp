#pragma once
// A child process started by fork and exec, out of the terminal's process group (Ctrl-C reaches
// the test program, not the child). Between fork and exec the child makes only async-signal-safe
// calls: nothing else is safe after fork in a threaded process. Every string the child needs is
// made before the fork.
#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace seqinbox::test {

struct spawn_setup {
    struct identity {
        uid_t uid;
        gid_t gid;
    };
    int input = -1;                                       ///< the child's stdin, when set
    int output = -1;                                      ///< the child's stdout and stderr, when set
    std::optional<identity> user;                         ///< whom the child runs as (we are root)
    std::string directory;                                ///< the child's working directory, when set
    std::optional<std::vector<std::string>> environment;  ///< the child's environment; ours when unset
};

namespace spawn_detail {

inline std::vector<char*> pointers(std::vector<std::string>& words) {
    std::vector<char*> out;
    for (auto& w : words) out.push_back(w.data());
    out.push_back(nullptr);
    return out;
}

/// In the child: exit 126 when it cannot become the user, 127 when the exec fails.
[[noreturn]] inline void become(const std::string& program, char* const* argv, char* const* envp, const spawn_setup& setup) {
    if (setup.input >= 0) ::dup2(setup.input, STDIN_FILENO);  // dup2 clears close-on-exec of the copy
    if (setup.output >= 0) {
        ::dup2(setup.output, STDOUT_FILENO);
        ::dup2(setup.output, STDERR_FILENO);
    }
    ::setpgid(0, 0);
    if (setup.user && (::setgroups(0, nullptr) != 0 || ::setgid(setup.user->gid) != 0 || ::setuid(setup.user->uid) != 0))
        ::_exit(126);
    if (!setup.directory.empty() && ::chdir(setup.directory.c_str()) != 0) ::_exit(126);
    if (envp != nullptr)
        ::execve(program.c_str(), argv, envp);
    else
        ::execv(program.c_str(), argv);
    ::_exit(127);
}

}  // namespace spawn_detail

/// Starts `program` with `arguments` (argv[0] included) as `setup` says; its pid, or -1 when the
/// fork failed.
inline pid_t spawn(const std::string& program, std::vector<std::string> arguments, spawn_setup setup) {
    const auto argv = spawn_detail::pointers(arguments);
    std::vector<char*> envp;
    if (setup.environment) envp = spawn_detail::pointers(*setup.environment);
    const pid_t pid = ::fork();
    if (pid == 0) spawn_detail::become(program, argv.data(), setup.environment ? envp.data() : nullptr, setup);
    return pid;
}

}  // namespace seqinbox::test
