#pragma once
// Shell commands of the throwaway servers' setup (initdb, pg_ctl, mariadb-install-db, ...): quoted
// arguments, run as the server's user when the tests run as root (PostgreSQL, MariaDB and
// pg_autoctl refuse root), output appended to a log that error messages quote.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace seqinbox::test {

/// `s` as one word of a POSIX shell command.
inline std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

inline bool running_as_root() { return ::geteuid() == 0; }

/// `command` as `user` when we are root (runuser), as ourselves otherwise.
inline std::string as_user(const std::string& user, const std::string& command) {
    return running_as_root() ? "runuser -u " + user + " -- sh -c " + shell_quote(command) : command;
}

/// Runs `command` with `sh -c`, its output and errors appended to `log`; whether it exited 0.
inline bool run_logged(const std::string& command, const std::string& log) {
    const int status = std::system(("(" + command + ") >>" + shell_quote(log) + " 2>&1").c_str());
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace seqinbox::test
