#pragma once
// A port on 127.0.0.1 that nothing listens on right now (bound, then closed): a dead host for
// multi-host connection strings, or a port for a throwaway server (which may lose it to a
// race: retry).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace seqinbox::test
