#pragma once
// A minimal HTTP client for the relay's loopback endpoint (/metrics, /healthz, the operator API) in tests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace seqinbox::test {

/// A socket connected to 127.0.0.1:`port` (-1: no connection); the caller closes it.
inline int connect_loopback(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
}

struct http_reply {
    int status = 0;
    std::string head;
    std::string body;
};

/// Sends `request` (raw bytes) to 127.0.0.1:`port` and reads the answer (status 0: no
/// connection, or no answer when a wait for the endpoint took longer than `patience`; zero
/// patience waits as long as it takes).
inline http_reply http_exchange(std::uint16_t port, const std::string& request, std::chrono::seconds patience = std::chrono::seconds(0)) {
    const int fd = connect_loopback(port);
    http_reply reply;
    if (fd < 0) return reply;
    const timeval limit{static_cast<time_t>(patience.count()), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string response;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    const auto blank = response.find("\r\n\r\n");
    if (blank == std::string::npos) return reply;  // cut short: no complete answer
    reply.head = response.substr(0, blank);
    reply.body = response.substr(blank + 4);
    if (response.starts_with("HTTP/1.1 ")) reply.status = std::stoi(response.substr(9, 3));
    return reply;
}

/// GET `path` from 127.0.0.1:`port`; see http_exchange.
inline http_reply http_get(std::uint16_t port, const std::string& path, std::chrono::seconds patience = std::chrono::seconds(0)) {
    return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", patience);
}

/// Polls /healthz until it answers `status` or `patience` passed; the last reply.
inline http_reply await_health(std::uint16_t port, int status, std::chrono::seconds patience = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    auto reply = http_get(port, "/healthz");
    while (reply.status != status && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        reply = http_get(port, "/healthz");
    }
    return reply;
}

/// `method` `path` with `headers` (each "Name: value") and `body` (sent with its Content-Length when not empty).
inline http_reply http_call(std::uint16_t port, const std::string& method, const std::string& path, const std::vector<std::string>& headers,
                            const std::string& body = {}) {
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto& h : headers) request += h + "\r\n";
    if (!body.empty()) request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return http_exchange(port, request + "\r\n" + body, std::chrono::seconds(10));
}

}  // namespace seqinbox::test
