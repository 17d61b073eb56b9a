#pragma once
// A port on 127.0.0.1 that nothing listens on right now (bound, then closed): a dead host for
// multi-host connection strings, or a port for a throwaway server (which may lose it to a
// race: start_on_unused_port retries).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <stdexcept>

namespace seqinbox::test {

inline int unused_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) throw std::runtime_error("unused_port: no free port on 127.0.0.1");
    return ntohs(address.sin_port);
}

/// Starts a server on an unused port: `port` set, then `start()`; a free port can be taken
/// between probing and listening, so up to `attempts` ports are tried. Whether one started.
inline bool start_on_unused_port(int& port, const std::function<bool()>& start, int attempts = 3) {
    for (int attempt = 1; attempt <= attempts; ++attempt) {
        port = unused_port();
        if (start()) return true;
    }
    return false;
}

}  // namespace seqinbox::test
