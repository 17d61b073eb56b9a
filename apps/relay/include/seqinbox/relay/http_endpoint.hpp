#pragma once
// A minimal HTTP/1.1 endpoint: /metrics and /healthz (fixed paths, GET and HEAD) and, behind
// them, a service for every other request (the operator API and console, any method, with a
// body). One request per connection. One thread of its own reads the requests of up to 64
// connections at once (a 65th closes the oldest still sending), four more call the handlers, so
// that a probe is answered while a scrape or an API call is slow or clients dawdle. A second
// call of a fixed path whose handler is running gets 503 at once; the service is called
// concurrently. Limits: 8 KiB of request head (431), 64 KiB of body (413; a body needs a
// Content-Length, 411 otherwise), 5 s to send the whole request (408) and 5 s to take the answer.
// It binds 127.0.0.1 unless told another IPv4 address; who may call what on the open network is
// the service's decision (seqinbox/relay/http_access.hpp).
//
// Thread safety: handlers run on the endpoint's threads; one fixed path's handler is never called
// concurrently with itself, but different paths' handlers and the service may run at the same
// time, and must be safe to call while the rest of the program runs. The destructor stops the
// threads (within about 100 ms once the handlers running have returned).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace seqinbox::relay {

/// Header names are lower case; the path is as sent, without the query.
struct http_request {
    std::string method;
    std::string path;
    std::string query;  ///< after '?', undecoded
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;

    /// The first header named `name` (lower case).
    std::optional<std::string_view> header(std::string_view name) const;
    /// The query parameter `name`, percent-decoded ('+' is a space); the first if repeated.
    std::optional<std::string> parameter(std::string_view name) const;
};

struct http_response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body{};
    std::vector<std::pair<std::string, std::string>> headers{};  ///< besides Content-Type, -Length, Connection
};

/// Answers one fixed path. An exception it throws becomes a 500 response naming it.
using http_handler = std::function<http_response()>;
/// Answers any request no fixed path takes; exceptions as for http_handler.
using http_service = std::function<http_response(const http_request&)>;

/// Where an endpoint listens: an IPv4 address in dotted form and a port (0: a free one).
struct http_address {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;

    /// 127.0.0.0/8 (a host that is not an IPv4 address is not).
    bool loopback() const;
    /// Throws seqinbox::error (configuration) naming the host when it is not an IPv4 address.
    void check() const;
};

class http_endpoint {
public:
    /// Listens on 127.0.0.1:`port` (0: a free port the system picks, see port()) and starts
    /// serving `routes` (path -> handler; other paths get 404). Throws seqinbox::error
    /// (configuration) naming the port when it cannot listen, e.g. because the port is taken.
    http_endpoint(std::uint16_t port, std::map<std::string, http_handler> routes);
    /// Listens on `where`, serving `routes` and passing every other request to `others` (none:
    /// 404). Throws seqinbox::error (configuration) naming the address when it is not an IPv4
    /// address or cannot be listened on.
    http_endpoint(const http_address& where, std::map<std::string, http_handler> routes, http_service others);
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
    /// A connection whose request was read: the request, or the answer refusing it.
    struct arrived {
        int fd;
        std::string raw;
        std::optional<http_response> refusal;
    };

    void read_requests(const std::stop_token& stop);
    void accept_new(std::vector<reading>& open, std::chrono::steady_clock::time_point now);
    void hand_over(arrived&& a);
    void serve(const std::stop_token& stop);
    void answer(int client, const arrived& a, const std::stop_token& stop);
    http_response dispatch(const http_request& request);
    static http_response called(route& r);
    void stop_serving() noexcept;

    std::map<std::string, route> routes_;
    http_service others_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::mutex ready_mutex_;
    std::condition_variable_any ready_changed_;
    std::deque<arrived> ready_;
    std::vector<std::jthread> threads_;  // last: started once everything above is set
};

}  // namespace seqinbox::relay
