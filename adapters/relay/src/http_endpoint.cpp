#include "seqinbox/relay/http_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace {

constexpr std::size_t max_request_head = 8192;
constexpr int stop_check_ms = 100;

/// Closes a socket when the scope ends.
class socket_guard {
public:
    explicit socket_guard(int fd) : fd_(fd) {}
    ~socket_guard() {
        if (fd_ >= 0) ::close(fd_);
    }
    socket_guard(const socket_guard&) = delete;
    socket_guard& operator=(const socket_guard&) = delete;
    int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }

private:
    int fd_;
};

[[noreturn]] void cannot_listen(std::uint16_t port, const char* step) {
    throw error(error_category::configuration, "http endpoint: cannot listen on 127.0.0.1:" + std::to_string(port) + " (" +
                                                   step + ": " + std::strerror(errno) + "); choose another port");
}

/// A listening socket bound to 127.0.0.1:`port`.
int listen_on_loopback(std::uint16_t port) {
    socket_guard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) cannot_listen(port, "socket");
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a restart must not wait for TIME_WAIT
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) cannot_listen(port, "bind");
    if (::listen(fd.get(), 16) != 0) cannot_listen(port, "listen");
    return fd.release();
}

std::uint16_t bound_port(int fd) {
    sockaddr_in address{};
    socklen_t size = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    return ntohs(address.sin_port);
}

std::string_view reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 400: return "Bad Request";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

/// The request head (up to the blank line), or what arrived before the client stopped sending.
std::string read_head(int client) {
    std::string head;
    char buffer[1024];
    while (head.size() < max_request_head && head.find("\r\n\r\n") == std::string::npos) {
        const auto n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        head.append(buffer, static_cast<std::size_t>(n));
    }
    return head;
}

void write_all(int client, std::string_view data) {
    while (!data.empty()) {
        const auto n = ::send(client, data.data(), data.size(), MSG_NOSIGNAL);
        if (n <= 0) return;  // the client left: nothing to tell it
        data.remove_prefix(static_cast<std::size_t>(n));
    }
}

std::string render(const http_response& r, bool with_body) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(reason_phrase(r.status)) +
                      "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                      "\r\nConnection: close\r\n\r\n";
    if (with_body) out += r.body;
    return out;
}

http_response text(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body)}; }

}  // namespace

http_endpoint::http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes)
    : routes_(std::move(routes)), listener_(listen_on_loopback(port)), port_(bound_port(listener_)) {
    socket_guard until_serving(listener_);  // no destructor runs for a half-built object
    thread_ = std::thread([this] { serve(); });
    until_serving.release();
}

http_endpoint::~http_endpoint() {
    stopping_ = true;
    thread_.join();
    ::close(listener_);
}

void http_endpoint::serve() {
    while (!stopping_) {
        pollfd waiting{listener_, POLLIN, 0};
        if (::poll(&waiting, 1, stop_check_ms) <= 0) continue;  // timeout or EINTR: check stopping_ again
        socket_guard client(::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC));
        if (client.get() < 0) continue;
        const timeval patience{2, 0};  // a silent client must not block the probe behind it for long
        ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
        ::setsockopt(client.get(), SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof patience);
        answer(client.get());
    }
}

void http_endpoint::answer(int client) const {
    const std::string head = read_head(client);
    const auto line_end = head.find("\r\n");
    const std::string_view line = std::string_view(head).substr(0, line_end);
    const auto first_space = line.find(' ');
    const auto second_space = line.find(' ', first_space == std::string_view::npos ? line.size() : first_space + 1);
    if (line_end == std::string::npos || first_space == std::string_view::npos || second_space == std::string_view::npos)
        return write_all(client, render(text(400, "malformed request line\n"), true));
    const std::string_view method = line.substr(0, first_space);
    std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    target = target.substr(0, target.find('?'));  // a scraper may add parameters; the paths take none
    const bool head_only = method == "HEAD";
    if (method != "GET" && !head_only) return write_all(client, render(text(405, "only GET and HEAD\n"), true));
    const auto route = routes_.find(std::string(target));
    if (route == routes_.end()) return write_all(client, render(text(404, "no such path: " + std::string(target) + "\n"), !head_only));
    http_response response;
    try {
        response = route->second();
    } catch (const std::exception& e) {
        response = text(500, std::string("handler failed: ") + e.what() + "\n");
    } catch (...) {
        response = text(500, "handler failed\n");
    }
    write_all(client, render(response, !head_only));
}

}  // namespace seqinbox::relay
