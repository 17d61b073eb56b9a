#include "seqinbox/relay/http_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace {

using steady = std::chrono::steady_clock;

constexpr std::size_t max_request_head = 8192;
constexpr int stop_check_ms = 100;
constexpr std::size_t serving_threads = 4;        // handlers: a probe gets through while a scrape is slow
constexpr std::size_t max_reading = 64;           // connections whose request head is still coming
constexpr auto patience = std::chrono::seconds(5);  // for the request head, then for the answer

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
    // non-blocking: of the threads woken by one connection, those that lose the accept go back to waiting
    socket_guard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
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
    case 408: return "Request Timeout";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

/// Waits until `client` is ready for `events`; false when the deadline passes or a stop is requested first.
bool await_ready(int client, short events, steady::time_point deadline, const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
        if (left <= 0) return false;
        pollfd ready{client, events, 0};
        if (::poll(&ready, 1, static_cast<int>(std::min<long long>(left, stop_check_ms))) > 0) return true;
    }
    return false;
}

bool interrupted(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR); }

/// Sends `data` unless the client leaves or does not take it within `patience`.
void write_all(int client, std::string_view data, const std::stop_token& stop) {
    const auto deadline = steady::now() + patience;
    while (!data.empty() && await_ready(client, POLLOUT, deadline, stop)) {
        const auto n = ::send(client, data.data(), data.size(), MSG_NOSIGNAL);
        if (interrupted(n)) continue;
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

/// A connection whose request head is still arriving, all read by one thread with poll.
struct http_endpoint::reading {
    int fd;
    std::string head;
    steady::time_point deadline;

    /// Reads what arrived; true once the head is complete or the client stopped sending.
    bool read_some() {
        char buffer[1024];
        for (;;) {
            const auto n = ::recv(fd, buffer, sizeof buffer, 0);
            if (n < 0 && errno == EINTR) continue;
            if (interrupted(n)) return false;  // nothing more for now
            if (n <= 0) return true;
            head.append(buffer, static_cast<std::size_t>(n));
            if (head.size() >= max_request_head || head.find("\r\n\r\n") != std::string::npos) return true;
        }
    }
};

http_endpoint::http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes)
    : listener_(listen_on_loopback(port)), port_(bound_port(listener_)) {
    socket_guard until_serving(listener_);  // no destructor runs for a half-built object
    for (auto& [path, handler] : routes) routes_[path].handler = std::move(handler);
    try {
        for (std::size_t i = 0; i < serving_threads; ++i) threads_.emplace_back([this](const std::stop_token& stop) { serve(stop); });
        threads_.emplace_back([this](const std::stop_token& stop) { read_requests(stop); });
    } catch (...) {
        stop_serving();  // before the listener closes under the started threads
        throw;
    }
    until_serving.release();
}

http_endpoint::~http_endpoint() {
    stop_serving();
    ::close(listener_);
    for (const auto& request : ready_) ::close(request.first);
}

void http_endpoint::stop_serving() noexcept {
    for (auto& thread : threads_) thread.request_stop();
    ready_changed_.notify_all();
    threads_.clear();  // joins
}

// One thread reads every request head, each connection against its own deadline: a client that
// dribbles or stays silent costs a slot in a poll set, not a serving thread.
void http_endpoint::read_requests(const std::stop_token& stop) {
    std::vector<reading> open;
    while (!stop.stop_requested()) {
        std::vector<pollfd> ready{{listener_, POLLIN, 0}};
        for (const auto& r : open) ready.push_back({r.fd, POLLIN, 0});
        if (::poll(ready.data(), ready.size(), stop_check_ms) < 0) continue;  // EINTR
        const auto now = steady::now();
        std::vector<reading> still_open;
        for (std::size_t i = 0; i < open.size(); ++i) {
            auto& r = open[i];
            const bool complete = ready[i + 1].revents != 0 && r.read_some();
            if (complete || now >= r.deadline) hand_over(std::move(r), !complete);
            else still_open.push_back(std::move(r));
        }
        open = std::move(still_open);
        if ((ready[0].revents & POLLIN) != 0) accept_new(open, now);
    }
    for (const auto& r : open) ::close(r.fd);
}

void http_endpoint::accept_new(std::vector<reading>& open, steady::time_point now) {
    for (;;) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        if (open.size() == max_reading) {  // the oldest is the likeliest to be stuck: it makes room
            ::close(open.front().fd);
            open.erase(open.begin());
        }
        open.push_back({fd, {}, now + patience});
    }
}

void http_endpoint::hand_over(reading&& r, bool timed_out) {
    {
        const std::lock_guard lock(ready_mutex_);
        ready_.emplace_back(r.fd, timed_out ? std::nullopt : std::optional<std::string>(std::move(r.head)));
    }
    ready_changed_.notify_one();
}

void http_endpoint::serve(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        std::unique_lock lock(ready_mutex_);
        if (!ready_changed_.wait(lock, stop, [&] { return !ready_.empty(); })) return;
        auto [fd, head] = std::move(ready_.front());
        ready_.pop_front();
        lock.unlock();
        socket_guard client(fd);
        answer(client.get(), head, stop);
    }
}

void http_endpoint::answer(int client, const std::optional<std::string>& head, const std::stop_token& stop) {
    const auto reply = [&](const http_response& response, bool with_body) { write_all(client, render(response, with_body), stop); };
    if (!head) return reply(text(408, "the request head did not arrive within 5 s\n"), true);
    const auto line_end = head->find("\r\n");
    const std::string_view line = std::string_view(*head).substr(0, line_end);
    const auto first_space = line.find(' ');
    const auto second_space = line.find(' ', first_space == std::string_view::npos ? line.size() : first_space + 1);
    if (line_end == std::string::npos || first_space == std::string_view::npos || second_space == std::string_view::npos)
        return reply(text(400, "malformed request line\n"), true);
    const std::string_view method = line.substr(0, first_space);
    std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    target = target.substr(0, target.find('?'));  // a scraper may add parameters; the paths take none
    const bool head_only = method == "HEAD";
    if (method != "GET" && !head_only) return reply(text(405, "only GET and HEAD\n"), true);
    const auto found = routes_.find(std::string(target));
    if (found == routes_.end()) return reply(text(404, "no such path: " + std::string(target) + "\n"), !head_only);
    reply(called(found->second), !head_only);
}

http_response http_endpoint::called(route& r) {
    // A thread waiting here would hold one of the few serving threads: a second call of a busy
    // path is answered at once instead, so slow scrapes cannot take every thread from /healthz.
    const std::unique_lock one_at_a_time(r.calling, std::try_to_lock);
    if (!one_at_a_time) return text(503, "a call of this path is in progress; try again\n");
    try {
        return r.handler();
    } catch (const std::exception& e) {
        return text(500, std::string("handler failed: ") + e.what() + "\n");
    } catch (...) {
        return text(500, "handler failed\n");
    }
}

}  // namespace seqinbox::relay
