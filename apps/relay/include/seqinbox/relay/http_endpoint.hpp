#pragma once
// A minimal HTTP/1.1 endpoint: fixed paths (/metrics, /healthz: GET and HEAD) and, behind them,
// a service for every other request (the operator API and console, any method, with a body).
// One request per connection. It binds 127.0.0.1 unless told another IPv4 address; who may call
// what on the open network is the service's decision (seqinbox/relay/http_access.hpp), and a
// gate may refuse calls of the fixed paths the same way (http_endpoint_options::fixed_gate).
//
// Threads and bounds, so that a probe is answered whatever other clients do:
// - One thread does all socket I/O with poll: it reads every request (5 s each to arrive, then
//   408; at most 64 still arriving, a 65th closes the oldest) and writes every answer without
//   blocking, each within answer_deadline (5 s) as a whole, after which the connection is
//   reset. A client that never reads its answer costs a connection and its buffered answer for
//   5 s, never a thread: with 40 clients that asked for 8 MB each and read nothing, /healthz
//   took 47 s before this design (0.3 ms with none) and 0.4 ms with it.
// - Four threads call the service; each fixed path has a thread of its own that calls its
//   handler, one call at a time, so a probe never waits behind the service or a slow scrape.
//   At most 8 calls of a fixed path wait while its thread answers one; another gets 503 at once.
// - It holds at most max_connections (128) connections whose request arrived (waiting for a
//   handler, in one, or taking the answer), plus the 64 still arriving: at most 192 sockets and
//   128 buffered answers. A service request that arrives while 112 are held gets 503 at once,
//   leaving the last 16 to the fixed paths; a connection that arrives while 128 are held is
//   answered 503 before its request is read, and closed.
// - When the process has no file descriptor left (EMFILE, ENFILE) it stops polling the listener
//   for 100 ms at a time instead of retrying at once: at the limit the process used 1.0
//   CPU-second per second before, 0.5 ms now, and it serves again once descriptors are free.
// Limits of a request: 8 KiB of head (431), 64 KiB of body (413; a body needs a Content-Length,
// 411 otherwise).
//
// Thread safety: handlers run on the endpoint's threads; one fixed path's handler is never called
// concurrently with itself, but different paths' handlers and the service may run at the same
// time, and must be safe to call while the rest of the program runs. connections_held() may be
// called from any thread. The destructor stops the threads (within about 100 ms once the
// handlers running have returned) and closes every connection.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

/// Refuses a call of a fixed path before its handler runs (the answer), or lets it through
/// (nothing). Called on that path's thread.
using http_gate = std::function<std::optional<http_response>(const http_request&)>;

/// How much an endpoint holds, and for how long.
struct http_endpoint_options {
    /// Connections held at once whose request arrived (see above); at least 1.
    std::size_t max_connections = 128;
    /// How long a client has to take its whole answer; then its connection is reset.
    std::chrono::milliseconds answer_deadline = std::chrono::seconds(5);
    /// Called before each fixed path's handler (none: every call goes through).
    http_gate fixed_gate{};
};

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
    /// 404), within `options`. Throws seqinbox::error (configuration) naming the address when it
    /// is not an IPv4 address or cannot be listened on, or naming max_connections when it is 0.
    http_endpoint(const http_address& where, std::map<std::string, http_handler> routes, http_service others,
                  http_endpoint_options options = {});
    ~http_endpoint();
    http_endpoint(const http_endpoint&) = delete;
    http_endpoint& operator=(const http_endpoint&) = delete;

    /// The port it listens on.
    std::uint16_t port() const noexcept { return port_; }
    /// The connections it holds now (as of its I/O thread's last turn).
    std::size_t connections_held() const noexcept;

private:
    struct state;

    std::uint16_t port_ = 0;
    std::unique_ptr<state> state_;
};

}  // namespace seqinbox::relay
