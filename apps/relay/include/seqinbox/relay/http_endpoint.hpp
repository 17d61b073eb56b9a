#pragma once
// A minimal HTTP/1.1 endpoint on the loopback interface for /metrics and /healthz: GET (and HEAD)
// of fixed paths, one request per connection. One thread of its own reads the request heads of
// up to 64 connections at once (a 65th closes the oldest still sending), four more call the
// handlers, so that a probe is answered while a scrape is slow or clients dawdle. A second call
// of a path whose handler is running gets 503 at once. It is meant for a scraper and a health
// probe on the same host, not for the open network: it binds 127.0.0.1 only, reads at most 8 KiB
// of request head, and gives a client 5 s to send it (then answers 408 and closes) and 5 s to take
// the answer.
//
// Thread safety: handlers run on the endpoint's threads; one path's handler is never called
// concurrently with itself, but different paths' handlers may run at the same time, and must be
// safe to call while the rest of the program runs. The destructor stops the threads (within about
// 100 ms once the handlers running have returned).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace seqinbox::relay {

struct http_response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body{};
};

/// Answers one path. An exception it throws becomes a 500 response naming it.
using http_handler = std::function<http_response()>;

class http_endpoint {
public:
    /// Listens on 127.0.0.1:`port` (0: a free port the system picks, see port()) and starts
    /// serving `routes` (path -> handler; other paths get 404). Throws seqinbox::error
    /// (configuration) naming the port when it cannot listen, e.g. because the port is taken.
    http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes);
    ~http_endpoint();
    http_endpoint(const http_endpoint&) = delete;
    http_endpoint& operator=(const http_endpoint&) = delete;

    /// The port it listens on.
    std::uint16_t port() const noexcept { return port_; }

private:
    /// A path's handler, called by one thread at a time.
    struct route {
        http_handler handler;
        std::mutex calling;
    };

    struct reading;

    void read_requests(const std::stop_token& stop);
    void accept_new(std::vector<reading>& open, std::chrono::steady_clock::time_point now);
    void hand_over(reading&& r, bool timed_out);
    void serve(const std::stop_token& stop);
    void answer(int client, const std::optional<std::string>& head, const std::stop_token& stop);
    static http_response called(route& r);
    void stop_serving() noexcept;

    std::map<std::string, route> routes_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::mutex ready_mutex_;
    std::condition_variable_any ready_changed_;
    std::deque<std::pair<int, std::optional<std::string>>> ready_;  ///< complete heads (none: timed out)
    std::vector<std::jthread> threads_;  // last: started once everything above is set
};

}  // namespace seqinbox::relay
