#include "seqinbox/relay/http_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace {

using steady = std::chrono::steady_clock;

constexpr std::size_t max_request_head = 8192;
constexpr std::size_t max_request_body = 64 * 1024;
constexpr int stop_check_ms = 100;
constexpr std::size_t serving_threads = 4;        // handlers: a probe gets through while a scrape is slow
constexpr std::size_t max_reading = 64;           // connections whose request is still coming
constexpr auto patience = std::chrono::seconds(5);  // for the request, then for the answer

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

[[noreturn]] void cannot_listen(const http_address& where, const std::string& why) {
    throw error(error_category::configuration,
                "http endpoint: cannot listen on " + where.host + ":" + std::to_string(where.port) + " (" + why + ")");
}

std::optional<in_addr> ipv4_of(const std::string& host) {
    in_addr address{};
    if (::inet_pton(AF_INET, host.c_str(), &address) != 1) return std::nullopt;
    return address;
}

/// A listening socket bound to `where`.
int listen_on(const http_address& where) {
    where.check();
    const auto host = ipv4_of(where.host);
    const auto failed = [&](const char* step) { cannot_listen(where, std::string(step) + ": " + std::strerror(errno) + "; choose another port"); };
    // non-blocking: of the threads woken by one connection, those that lose the accept go back to waiting
    socket_guard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) failed("socket");
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a restart must not wait for TIME_WAIT
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(where.port);
    address.sin_addr = *host;
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) failed("bind");
    if (::listen(fd.get(), 16) != 0) failed("listen");
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
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
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
                      "\r\nConnection: close\r\n";
    for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
    out += "\r\n";
    if (with_body) out += r.body;
    return out;
}

http_response text(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body), {}}; }

std::string lower(std::string_view s) {
    std::string out(s);
    std::ranges::transform(out, out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// `s` percent-decoded, '+' as a space; a malformed escape stays as it is.
std::string percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') out += ' ';
        else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else out += s[i];
    }
    return out;
}

using header_list = std::vector<std::pair<std::string, std::string>>;

/// The header lines of a request head (after its request line), names trimmed and lower case;
/// none when one is malformed.
std::optional<header_list> headers_of(std::string_view head) {
    const auto request_line_end = head.find("\r\n");
    head = request_line_end == std::string_view::npos ? std::string_view() : head.substr(request_line_end + 2);
    header_list headers;
    while (!head.empty()) {
        const auto end = head.find("\r\n");
        const auto line = head.substr(0, end);
        head = end == std::string_view::npos ? std::string_view() : head.substr(end + 2);
        if (line.empty()) continue;
        const auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return std::nullopt;
        headers.emplace_back(lower(trimmed(line.substr(0, colon))), std::string(trimmed(line.substr(colon + 1))));
    }
    return headers;
}

/// Content-Length: 0 without one, none when it is not a number or given twice.
std::optional<std::size_t> content_length(const header_list& headers) {
    std::optional<std::size_t> found;
    for (const auto& [name, value] : headers) {
        if (name != "content-length") continue;
        std::size_t length = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (ec != std::errc{} || end != value.data() + value.size() || found) return std::nullopt;
        found = length;
    }
    return found.value_or(0);
}

bool chunked(const header_list& headers) {
    return std::ranges::any_of(headers, [](const auto& h) { return h.first == "transfer-encoding"; });
}

/// The request in `raw` (head and complete body), or the status and reason refusing it.
std::variant<http_request, http_response> parsed(const std::string& raw) {
    const auto head_end = raw.find("\r\n\r\n");
    const std::string_view head = std::string_view(raw).substr(0, head_end);
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const auto first_space = line.find(' ');
    const auto second_space = line.find(' ', first_space == std::string_view::npos ? line.size() : first_space + 1);
    if (first_space == std::string_view::npos || second_space == std::string_view::npos) return text(400, "malformed request line\n");
    auto headers = headers_of(head);
    if (!headers) return text(400, "malformed header line\n");
    http_request r;
    r.method = std::string(line.substr(0, first_space));
    const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    const auto question = target.find('?');
    r.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) r.query = std::string(target.substr(question + 1));
    r.body = raw.substr(head_end + 4, content_length(*headers).value_or(0));  // bytes after the body are not part of it
    r.headers = std::move(*headers);
    return r;
}

}  // namespace

std::optional<std::string_view> http_request::header(std::string_view name) const {
    for (const auto& [n, value] : headers)
        if (n == name) return value;
    return std::nullopt;
}

std::optional<std::string> http_request::parameter(std::string_view name) const {
    for (std::string_view rest = query; !rest.empty();) {
        const auto amp = rest.find('&');
        const auto pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        const auto equals = pair.find('=');
        if (percent_decoded(pair.substr(0, equals)) == name)
            return equals == std::string_view::npos ? std::string() : percent_decoded(pair.substr(equals + 1));
    }
    return std::nullopt;
}

void http_address::check() const {
    if (!ipv4_of(host))
        throw error(error_category::configuration,
                    "http endpoint: '" + host + "' is not an IPv4 address such as 127.0.0.1 or 0.0.0.0");
}

bool http_address::loopback() const {
    const auto address = ipv4_of(host);
    return address && (ntohl(address->s_addr) >> 24) == 127;
}

/// A connection whose request is still arriving, all read by one thread with poll.
struct http_endpoint::reading {
    int fd;
    std::string raw;
    steady::time_point deadline;
    std::optional<http_response> refusal{};

    /// Reads what arrived; true once the request is complete or refused.
    bool read_some() {
        char buffer[4096];
        for (;;) {
            const auto n = ::recv(fd, buffer, sizeof buffer, 0);
            if (n < 0 && errno == EINTR) continue;
            if (interrupted(n)) return false;  // nothing more for now
            if (n <= 0) return complete() || refuse(400, "the request ended before it was complete\n");
            raw.append(buffer, static_cast<std::size_t>(n));
            if (complete()) return true;
        }
    }

    /// Whether the head and the body it announces are in, or the request is refused.
    bool complete() {
        if (refusal) return true;
        const auto head_end = raw.find("\r\n\r\n");
        if (head_end == std::string::npos)
            return raw.size() > max_request_head && refuse(431, "the request head is larger than 8 KiB\n");
        if (head_end > max_request_head) return refuse(431, "the request head is larger than 8 KiB\n");
        const auto headers = headers_of(std::string_view(raw).substr(0, head_end));
        if (!headers) return refuse(400, "malformed header line\n");
        if (chunked(*headers)) return refuse(411, "a request body needs a Content-Length (no Transfer-Encoding)\n");
        const auto length = content_length(*headers);
        if (!length) return refuse(400, "malformed Content-Length\n");
        if (*length > max_request_body) return refuse(413, "the request body is larger than 64 KiB\n");
        return raw.size() >= head_end + 4 + *length;
    }

    bool refuse(int status, std::string why) {
        refusal = text(status, std::move(why));
        return true;
    }
};

http_endpoint::http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes)
    : http_endpoint(http_address{.host = "127.0.0.1", .port = port}, std::move(routes), {}) {}

http_endpoint::http_endpoint(const http_address& where, std::map<std::string, http_handler> routes, http_service others)
    : others_(std::move(others)), listener_(listen_on(where)), port_(bound_port(listener_)) {
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
    for (const auto& request : ready_) ::close(request.fd);
}

void http_endpoint::stop_serving() noexcept {
    for (auto& thread : threads_) thread.request_stop();
    ready_changed_.notify_all();
    threads_.clear();  // joins
}

// One thread reads every request, each connection against its own deadline: a client that
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
            if (complete) hand_over({r.fd, std::move(r.raw), std::move(r.refusal)});
            else if (now >= r.deadline) hand_over({r.fd, {}, text(408, "the request did not arrive within 5 s\n")});
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

void http_endpoint::hand_over(arrived&& a) {
    {
        const std::lock_guard lock(ready_mutex_);
        ready_.push_back(std::move(a));
    }
    ready_changed_.notify_one();
}

void http_endpoint::serve(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        std::unique_lock lock(ready_mutex_);
        if (!ready_changed_.wait(lock, stop, [&] { return !ready_.empty(); })) return;
        auto request = std::move(ready_.front());
        ready_.pop_front();
        lock.unlock();
        socket_guard client(request.fd);
        answer(client.get(), request, stop);
    }
}

void http_endpoint::answer(int client, const arrived& a, const std::stop_token& stop) {
    const auto reply = [&](const http_response& response, bool with_body) { write_all(client, render(response, with_body), stop); };
    if (a.refusal) return reply(*a.refusal, true);
    auto request = parsed(a.raw);
    if (auto* refused = std::get_if<http_response>(&request)) return reply(*refused, true);
    auto& r = std::get<http_request>(request);
    const bool head_only = r.method == "HEAD";
    if (head_only) r.method = "GET";
    reply(dispatch(r), !head_only);
}

http_response http_endpoint::dispatch(const http_request& request) {
    const auto found = routes_.find(request.path);
    if (found != routes_.end()) {
        if (request.method != "GET") return text(405, "only GET and HEAD\n");
        return called(found->second);
    }
    if (!others_) return text(404, "no such path: " + request.path + "\n");
    try {
        return others_(request);
    } catch (const std::exception& e) {
        return text(500, std::string("handler failed: ") + e.what() + "\n");
    } catch (...) {
        return text(500, "handler failed\n");
    }
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
