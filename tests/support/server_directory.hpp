#pragma once
// The directory of a throwaway server: made fresh under the system temp dir (<prefix>XXXXXX), owned
// by the server's user when the tests run as root, and recording its owner's pid (owner.pid). A
// directory whose owner no longer exists is a server left behind by a test program that was
// killed, whose watchdog died too: the next server of its kind removes it.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>

#include "support/process.hpp"
#include "support/shell_command.hpp"

namespace seqinbox::test {

inline std::filesystem::path temp_root() { return std::filesystem::temp_directory_path(); }

/// A fresh directory <temp>/<prefix>XXXXXX, mode 0700, given to `user` when we are root. `owner`
/// names the server in errors (e.g. "pg_server: mkdtemp failed").
inline std::filesystem::path make_server_directory(const std::string& prefix, const std::string& user, const std::string& owner) {
    std::string pattern = (temp_root() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error(owner + ": mkdtemp failed");
    const std::filesystem::path dir = pattern;
    std::ofstream(dir / "owner.pid") << ::getpid() << '\n';
    if (running_as_root()) {
        const passwd* pw = ::getpwnam(user.c_str());
        if (pw == nullptr) throw std::runtime_error(owner + ": running as root needs a '" + user + "' user");
        if (::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0) throw std::runtime_error(owner + ": cannot chown " + dir.string());
    }
    ::chmod(dir.c_str(), 0700);
    return dir;
}

/// Removes `dir` and all it holds, whatever fails.
inline void remove_directory(const std::filesystem::path& dir) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
}

/// Calls `remove` on every <temp>/<prefix>... directory whose owner no longer exists.
inline void remove_abandoned_directories(const std::string& prefix, const std::function<void(const std::filesystem::path&)>& remove) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(temp_root(), ec)) {
        if (!entry.path().filename().string().starts_with(prefix)) continue;
        const pid_t owner = pid_in_file(entry.path() / "owner.pid");
        if (owner == 0) continue;  // being created right now
        if (process_alive(owner)) continue;
        remove(entry.path());
    }
}

/// The files `names` of `dir`, one after the other (a missing one reads as empty): the logs that
/// a server's start error quotes.
inline std::string read_files(const std::filesystem::path& dir, std::initializer_list<const char*> names) {
    std::string text;
    for (const char* name : names) {
        std::ifstream in(dir / name);
        text += std::string(std::istreambuf_iterator<char>(in), {});
    }
    return text;
}

}  // namespace seqinbox::test
