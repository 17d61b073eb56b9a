#include "seqinbox/relay/http_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <stop_token>
#include <thread>
#include <variant>

#include "http_connection.hpp"
#include "http_message.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace {

using detail::answering;
using detail::arriving;
using detail::owned_fd;
using detail::render;
using detail::steady;
using detail::text;

constexpr int stop_check_ms = 100;
constexpr std::size_t service_threads = 4;        // a slow view does not hold every other request
constexpr std::size_t max_arriving = 64;          // connections whose request is still coming
constexpr std::size_t max_waiting_per_path = 8;   // calls of one fixed path waiting for its thread
constexpr std::size_t probe_reserve = 16;         // connections service requests leave to the fixed paths
constexpr std::size_t max_accepts_per_turn = 64;  // a flood of connections does not starve the answers
constexpr auto request_patience = std::chrono::seconds(5);
constexpr auto accept_pause = std::chrono::milliseconds(100);  // after EMFILE: retrying at once spins

[[noreturn]] void cannot_listen(const http_address& where, const std::string& why) {
    throw error(error_category::configuration,
                "http endpoint: cannot listen on " + where.host + ":" + std::to_string(where.port) + " (" + why + ")");
}

/// A listening socket bound to `where`.
owned_fd listen_on(const http_address& where) {
    where.check();
    const auto host = detail::ipv4_of(where.host);
    const auto failed = [&](const char* step) { cannot_listen(where, std::string(step) + ": " + std::strerror(errno) + "; choose another port"); };
    // non-blocking: accept returns EAGAIN once the backlog is empty
    owned_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) failed("socket");
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a restart must not wait for TIME_WAIT
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(where.port);
    address.sin_addr = *host;
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) failed("bind");
    if (::listen(fd.get(), 16) != 0) failed("listen");
    return fd;
}

std::uint16_t bound_port(int fd) {
    sockaddr_in address{};
    socklen_t size = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    return ntohs(address.sin_port);
}

/// What the handler threads signal the I/O thread with when an answer is ready.
owned_fd wake_event(const http_address& where) {
    owned_fd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!fd) cannot_listen(where, std::string("eventfd: ") + std::strerror(errno));
    return fd;
}

/// Answers a connection past the limit with one non-blocking send of `answer`, then closes it.
void refuse_at_once(owned_fd client, const http_response& answer) {
    char discard[8192];
    // what arrived is read first, so that the close is not a reset that could drop the answer
    for (int i = 0; i < 8 && ::recv(client.get(), discard, sizeof discard, MSG_DONTWAIT) > 0; ++i) {}
    const auto bytes = render(answer, true);
    [[maybe_unused]] const auto sent = ::send(client.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/// `f()`, or the 500 naming what it threw.
template <typename F>
http_response guarded(F&& f) {
    try {
        return f();
    } catch (const std::exception& e) {
        return text(500, std::string("handler failed: ") + e.what() + "\n");
    } catch (...) {
        return text(500, "handler failed\n");
    }
}

}  // namespace

struct http_endpoint::state {
    /// A fixed path: its handler, called by its own thread, and the calls waiting for it.
    struct fixed_path {
        http_handler handler;
        detail::handoff<detail::call> calls;
    };

    state(const http_address& where, std::map<std::string, http_handler> routes, http_service service, http_endpoint_options limits);
    ~state();
    state(const state&) = delete;
    state& operator=(const state&) = delete;

    void run_io(const std::stop_token& stop);
    void write_answers(std::span<const pollfd> polled, steady::time_point now);
    void read_requests(std::span<const pollfd> polled, steady::time_point now);
    void dispatch(arriving&& a, steady::time_point now);
    void take_answers(steady::time_point now);
    void accept_new(steady::time_point now);
    void start_answer(owned_fd client, std::string bytes, steady::time_point now);
    std::size_t held_now() const noexcept { return reading.size() + answered(); }
    /// Connections whose request arrived: waiting for a handler, in one, or taking the answer.
    std::size_t answered() const noexcept { return writing.size() + in_handlers; }
    /// answered() past which service requests are refused: the rest are the probes'.
    std::size_t service_limit() const noexcept { return options.max_connections - std::min(probe_reserve, options.max_connections / 2); }
    http_response full() const { return text(503, "the endpoint holds " + std::to_string(options.max_connections) + " connections, its limit; try again\n"); }

    void serve(detail::handoff<detail::call>& calls, const std::function<http_response(const http_request&)>& respond,
               const std::stop_token& stop);
    http_response fixed_answer(fixed_path& path, const http_request& request) const;
    void wake_io() const noexcept;

    // Set before the threads start, constant after.
    owned_fd listener;
    owned_fd wake;
    http_endpoint_options options;
    http_service others;
    std::map<std::string, fixed_path> paths;
    // Shared by the threads.
    detail::handoff<detail::call> service_calls;
    detail::handoff<detail::answer> answers;
    std::atomic<std::size_t> held{0};
    // The I/O thread's alone.
    std::vector<arriving> reading;
    std::vector<answering> writing;
    std::size_t in_handlers = 0;  // calls handed to a handler thread whose answer has not come back
    steady::time_point accept_paused_until{};
    std::vector<std::jthread> threads;  // last: started once everything above is set, joined first
};

http_endpoint::state::state(const http_address& where, std::map<std::string, http_handler> routes, http_service service,
                            http_endpoint_options limits)
    : listener(listen_on(where)), wake(wake_event(where)), options(std::move(limits)), others(std::move(service)) {
    if (options.max_connections == 0)
        throw error(error_category::configuration, "http endpoint: max_connections is 0; it must hold at least one connection");
    for (auto& [path, handler] : routes) paths[path].handler = std::move(handler);
    for (auto& [path, fixed] : paths)
        threads.emplace_back([this, &fixed](const std::stop_token& stop) {
            serve(fixed.calls, [this, &fixed](const http_request& r) { return fixed_answer(fixed, r); }, stop);
        });
    if (others)
        for (std::size_t i = 0; i < service_threads; ++i)
            threads.emplace_back([this](const std::stop_token& stop) { serve(service_calls, others, stop); });
    threads.emplace_back([this](const std::stop_token& stop) { run_io(stop); });
}

http_endpoint::state::~state() {
    for (auto& thread : threads) thread.request_stop();
    wake_io();
}

void http_endpoint::state::wake_io() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake.get(), &one, sizeof one);
}

// One thread reads every request and writes every answer without blocking, each connection
// against its own deadline: a client that dribbles, stays silent or does not read costs a
// connection, never a thread.
void http_endpoint::state::run_io(const std::stop_token& stop) {
    std::vector<pollfd> polled;
    while (!stop.stop_requested()) {
        const bool accepting = steady::now() >= accept_paused_until;
        polled.assign({{wake.get(), POLLIN, 0}, {accepting ? listener.get() : -1, POLLIN, 0}});  // -1: not polled
        for (const auto& w : writing) polled.push_back({w.client.get(), POLLOUT, 0});
        for (const auto& r : reading) polled.push_back({r.client.get(), POLLIN, 0});
        if (::poll(polled.data(), polled.size(), stop_check_ms) < 0) continue;  // EINTR
        const auto now = steady::now();
        const auto connections = std::span<const pollfd>(polled).subspan(2);
        const auto written = writing.size();
        write_answers(connections.first(written), now);
        read_requests(connections.subspan(written), now);
        take_answers(now);
        if ((polled[1].revents & POLLIN) != 0) accept_new(now);
        held = held_now();
    }
}

void http_endpoint::state::write_answers(std::span<const pollfd> polled, steady::time_point now) {
    std::vector<answering> still;
    for (std::size_t i = 0; i < polled.size(); ++i) {
        auto& w = writing[i];
        if (polled[i].revents != 0 && w.send_some()) continue;  // all sent, or the client left: closed
        if (now >= w.deadline) w.client.reset_connection();
        else still.push_back(std::move(w));
    }
    writing = std::move(still);
}

void http_endpoint::state::read_requests(std::span<const pollfd> polled, steady::time_point now) {
    std::vector<arriving> still;
    for (std::size_t i = 0; i < polled.size(); ++i) {
        auto& r = reading[i];
        if (polled[i].revents != 0 && r.read_some()) dispatch(std::move(r), now);
        else if (now >= r.deadline) start_answer(std::move(r.client), render(text(408, "the request did not arrive within 5 s\n"), true), now);
        else still.push_back(std::move(r));
    }
    reading = std::move(still);
}

void http_endpoint::state::dispatch(arriving&& a, steady::time_point now) {
    if (a.refusal) return start_answer(std::move(a.client), render(*a.refusal, true), now);
    auto request = detail::parsed(a.raw);
    if (auto* refused = std::get_if<http_response>(&request)) return start_answer(std::move(a.client), render(*refused, true), now);
    auto& r = std::get<http_request>(request);
    const bool with_body = r.method != "HEAD";
    if (!with_body) r.method = "GET";
    const auto fixed = paths.find(r.path);
    if (fixed != paths.end() && fixed->second.calls.size() >= max_waiting_per_path)
        return start_answer(std::move(a.client), render(text(503, "calls of this path are waiting; try again\n"), with_body), now);
    if (fixed == paths.end() && !others)
        return start_answer(std::move(a.client), render(text(404, "no such path: " + r.path + "\n"), with_body), now);
    if (fixed == paths.end() && answered() >= service_limit())
        return start_answer(std::move(a.client), render(full(), with_body), now);
    auto& calls = fixed != paths.end() ? fixed->second.calls : service_calls;
    calls.push({std::move(a.client), std::move(r), with_body});
    ++in_handlers;
}

void http_endpoint::state::take_answers(steady::time_point now) {
    std::uint64_t signalled = 0;
    [[maybe_unused]] const auto read = ::read(wake.get(), &signalled, sizeof signalled);  // resets the event
    for (auto& a : answers.take_all()) {
        --in_handlers;
        start_answer(std::move(a.client), std::move(a.bytes), now);
    }
}

void http_endpoint::state::start_answer(owned_fd client, std::string bytes, steady::time_point now) {
    answering w{std::move(client), std::move(bytes), now + options.answer_deadline};
    if (!w.send_some()) writing.push_back(std::move(w));  // most answers fit the socket's buffer at once
}

void http_endpoint::state::accept_new(steady::time_point now) {
    for (std::size_t i = 0; i < max_accepts_per_turn; ++i) {
        owned_fd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!client) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            // the listener stays readable while no descriptor is left: poll it again only later
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) accept_paused_until = now + accept_pause;
            return;
        }
        if (reading.size() == max_arriving) reading.erase(reading.begin());  // the oldest is the likeliest to be stuck
        else if (answered() >= options.max_connections) {
            refuse_at_once(std::move(client), full());
            continue;
        }
        reading.push_back({std::move(client), now + request_patience});
    }
}

void http_endpoint::state::serve(detail::handoff<detail::call>& calls, const std::function<http_response(const http_request&)>& respond,
                                 const std::stop_token& stop) {
    while (auto call = calls.pop(stop)) {
        const auto response = guarded([&] { return respond(call->request); });
        answers.push({std::move(call->client), render(response, call->with_body)});
        wake_io();
    }
}

http_response http_endpoint::state::fixed_answer(fixed_path& path, const http_request& request) const {
    if (options.fixed_gate)
        if (auto refusal = options.fixed_gate(request)) return *refusal;
    if (request.method != "GET") return text(405, "only GET and HEAD\n");
    return path.handler();
}

http_endpoint::http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes)
    : http_endpoint(http_address{.host = "127.0.0.1", .port = port}, std::move(routes), {}) {}

http_endpoint::http_endpoint(const http_address& where, std::map<std::string, http_handler> routes, http_service others,
                             http_endpoint_options options)
    : state_(std::make_unique<state>(where, std::move(routes), std::move(others), std::move(options))) {
    port_ = bound_port(state_->listener.get());
}

http_endpoint::~http_endpoint() = default;

std::size_t http_endpoint::connections_held() const noexcept { return state_->held.load(); }

}  // namespace seqinbox::relay
