#pragma once
// A minimal HTTP/1.1 endpoint on the loopback interface for /metrics and /healthz: GET (and HEAD)
// of fixed paths, one request per connection, served one at a time on a thread of its own.
// It is meant for a scraper and a health probe on the same host, not for the open network:
// it binds 127.0.0.1 only, reads at most 8 KiB of request head and gives a client 2 s to send it.
//
// Thread safety: handlers run on the endpoint's thread; they must be safe to call while the
// rest of the program runs. The destructor stops the thread (within about 100 ms).
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

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
    void serve();
    void answer(int client) const;

    std::map<std::string, http_handler> routes_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread thread_;  // last: started once everything above is set
};

}  // namespace seqinbox::relay
