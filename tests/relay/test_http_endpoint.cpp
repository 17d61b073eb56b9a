// The relay's loopback HTTP endpoint on its own: a client that dribbles its request neither holds
// /healthz nor stays connected past the request deadline, a slow handler of one path does not
// hold another path, clients that never read their answers do not hold /healthz and are cut off
// after the answer deadline, and past the connection limit a client gets 503 at once. The bounds
// below are liveness bounds (the bugs made a probe wait 20 s and more), not speed requirements.
#define BOOST_TEST_MODULE seqinbox relay http endpoint
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "relay/http_client.hpp"
#include "seqinbox/relay/http_endpoint.hpp"

namespace si = seqinbox;
using namespace std::chrono_literals;

namespace {

constexpr auto probe_patience = 3s;

si::relay::http_response ok() { return {200, "text/plain; charset=utf-8", "ok\n"}; }

/// A client that sends one byte of a request every 1.5 s and notices when the endpoint closes
/// the connection (or answers it).
class slow_client {
public:
    explicit slow_client(std::uint16_t port) : fd_(si::test::connect_loopback(port)) {
        thread_ = std::jthread([this](std::stop_token stop) { dribble(stop); });
    }
    ~slow_client() {
        thread_.request_stop();
        thread_.join();
        if (fd_ >= 0) ::close(fd_);
    }
    slow_client(const slow_client&) = delete;
    slow_client& operator=(const slow_client&) = delete;

    int bytes_sent() const { return sent_; }
    bool cut_off() const { return cut_off_; }

    /// Waits until `predicate` holds or `patience` passed; whether it holds.
    template <typename Predicate>
    static bool await(Predicate predicate, std::chrono::seconds patience) {
        const auto deadline = std::chrono::steady_clock::now() + patience;
        while (!predicate() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
        return predicate();
    }

private:
    void dribble(const std::stop_token& stop) {
        constexpr std::string_view request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n\r\n";
        for (std::size_t i = 0; fd_ >= 0 && i < request.size() && !stop.stop_requested(); ++i) {
            if (::send(fd_, &request[i], 1, MSG_NOSIGNAL) != 1) break;
            ++sent_;
            const auto next = std::chrono::steady_clock::now() + 1500ms;
            while (std::chrono::steady_clock::now() < next && !stop.stop_requested()) {
                pollfd readable{fd_, POLLIN, 0};
                if (::poll(&readable, 1, 50) > 0) {  // an answer or the end of the connection
                    cut_off_ = true;
                    return;
                }
            }
        }
    }

    int fd_;
    std::atomic<int> sent_{0};
    std::atomic<bool> cut_off_{false};
    std::jthread thread_;  // last: started once everything above is set
};

/// The file descriptors this process has open (both ends of each loopback connection).
std::size_t open_fds() {
    return static_cast<std::size_t>(std::ranges::distance(std::filesystem::directory_iterator("/proc/self/fd")));
}

/// Lets a blocked handler go when the scope ends, whatever the test concluded.
struct release_on_exit {
    std::promise<void>& release;
    ~release_on_exit() { release.set_value(); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_client_dribbling_its_request_neither_holds_healthz_nor_stays_past_the_deadline) {
    si::relay::http_endpoint endpoint(0, {{"/healthz", ok}});
    slow_client slow(endpoint.port());
    BOOST_TEST_REQUIRE(slow_client::await([&] { return slow.bytes_sent() >= 2; }, 10s));  // the endpoint is reading it

    const auto probe = si::test::http_get(endpoint.port(), "/healthz", probe_patience);
    BOOST_TEST(probe.status == 200, "no answer within " << probe_patience.count() << " s while a slow client was connected");
    BOOST_TEST(probe.body == "ok\n");

    const bool cut_off = slow_client::await([&] { return slow.cut_off(); }, 15s);
    BOOST_TEST(cut_off, "still connected after " << slow.bytes_sent() << " bytes");
}

BOOST_AUTO_TEST_CASE(a_slow_handler_of_one_path_does_not_hold_another) {
    std::promise<void> release;
    const std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> scraping{false};
    si::relay::http_endpoint endpoint(0, {{"/healthz", ok},
                                          {"/metrics", [&] {
                                               scraping = true;
                                               released.wait();
                                               return ok();
                                           }}});
    const auto scrape = std::async(std::launch::async, [&] { return si::test::http_get(endpoint.port(), "/metrics"); });
    const release_on_exit guard{release};  // before the scrape's future waits for its end
    BOOST_TEST_REQUIRE(slow_client::await([&] { return scraping.load(); }, 10s));

    const auto probe = si::test::http_get(endpoint.port(), "/healthz", probe_patience);
    BOOST_TEST(probe.status == 200, "no answer within " << probe_patience.count() << " s while a scrape was in progress");
}

// Review of issue 17 (defect 7): the endpoint's four serving threads are shared by every path and
// every client, so the probe is held by what holds all four.

BOOST_AUTO_TEST_CASE(four_slow_scrapes_do_not_hold_healthz) {
    std::promise<void> release;
    const std::shared_future<void> released = release.get_future().share();
    std::atomic<int> scraping{0};
    si::relay::http_endpoint endpoint(0, {{"/healthz", ok},
                                          {"/metrics", [&] {
                                               ++scraping;
                                               released.wait();
                                               return ok();
                                           }}});
    std::vector<std::future<si::test::http_reply>> scrapes;
    const release_on_exit guard{release};  // before the scrapes' futures wait for their end
    for (int i = 0; i < 4; ++i)
        scrapes.push_back(std::async(std::launch::async, [&] { return si::test::http_get(endpoint.port(), "/metrics"); }));
    BOOST_TEST_REQUIRE(slow_client::await([&] { return scraping.load() >= 1; }, 10s));
    std::this_thread::sleep_for(500ms);  // the other three scrapes are accepted and wait for the first

    const auto probe = si::test::http_get(endpoint.port(), "/healthz", 10s);
    BOOST_TEST(probe.status == 200, "no answer within 10 s while four scrapes of a slow /metrics were in progress");
}

BOOST_AUTO_TEST_CASE(a_client_with_twelve_silent_connections_does_not_hold_healthz) {
    si::relay::http_endpoint endpoint(0, {{"/healthz", ok}});
    std::vector<int> silent;
    for (int i = 0; i < 12; ++i) silent.push_back(si::test::connect_loopback(endpoint.port()));
    std::this_thread::sleep_for(200ms);

    const auto probe = si::test::http_get(endpoint.port(), "/healthz", 10s);
    for (int fd : silent)
        if (fd >= 0) ::close(fd);
    BOOST_TEST(probe.status == 200, "no answer within 10 s while one client kept twelve connections open without a request");
}

// Review of issue 34 (defect 3): answers were written by the serving threads, so four clients
// that asked for a large answer and never read it held every thread, and /healthz with them
// (7.2 s with four such clients, 56 s with forty).

namespace {

constexpr std::size_t large_answer = 8 << 20;  // more than the two sockets' buffers hold

si::relay::http_response large(const si::relay::http_request&) { return {200, "text/plain; charset=utf-8", std::string(large_answer, 'x')}; }

/// A connection that asked for `path` and reads nothing (a small receive buffer, so that the
/// answer stays in the endpoint); -1 without a connection.
int ask_and_never_read(std::uint16_t port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
        ::close(fd);
        return -1;
    }
    return fd;
}

/// Closes the connections when the scope ends.
struct connections {
    std::vector<int> fds;
    ~connections() {
        for (int fd : fds)
            if (fd >= 0) ::close(fd);
    }
};

/// Every byte that is still to come on `fd` (or arrived before), until the endpoint closes the
/// connection; nothing when it does not within `patience`.
std::optional<std::size_t> bytes_until_closed(int fd, std::chrono::seconds patience) {
    const timeval limit{static_cast<time_t>(patience.count()), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    std::size_t total = 0;
    char buffer[65536];
    for (;;) {
        const auto n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n > 0) total += static_cast<std::size_t>(n);
        else if (n == 0 || errno == ECONNRESET) return total;
        else if (errno != EINTR) return std::nullopt;  // a timeout: still connected, nothing sent
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(twelve_clients_that_never_read_their_large_answers_do_not_hold_healthz) {
    si::relay::http_endpoint endpoint({}, {{"/healthz", ok}}, large);
    connections idle;
    for (int i = 0; i < 12; ++i) idle.fds.push_back(ask_and_never_read(endpoint.port(), "/api/v1/large"));
    BOOST_TEST_REQUIRE(std::ranges::count(idle.fds, -1) == 0);
    std::this_thread::sleep_for(500ms);  // the answers are being written

    const auto started = std::chrono::steady_clock::now();
    const auto probe = si::test::http_get(endpoint.port(), "/healthz", 2s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    BOOST_TEST(probe.status == 200, "no answer within 2 s while twelve clients did not read their answers (" << took.count() << " ms)");
    BOOST_TEST_MESSAGE("/healthz with twelve non-reading clients: " << took.count() << " ms");
}

BOOST_AUTO_TEST_CASE(a_client_that_never_reads_its_answer_is_dropped_after_the_answer_deadline) {
    si::relay::http_endpoint endpoint({}, {{"/healthz", ok}}, large, {.answer_deadline = 1s});
    connections idle{{ask_and_never_read(endpoint.port(), "/api/v1/large")}};
    BOOST_TEST_REQUIRE(idle.fds[0] >= 0);
    std::this_thread::sleep_for(3s);  // past the 1 s the endpoint gives this answer
    BOOST_TEST(endpoint.connections_held() == 0u);

    const auto received = bytes_until_closed(idle.fds[0], 5s);
    BOOST_TEST_REQUIRE(received.has_value(), "still connected 3 s after asking, without reading");
    BOOST_TEST(*received < large_answer, "the whole answer came after all");
}

BOOST_AUTO_TEST_CASE(a_reader_gets_a_large_answer_whole) {
    si::relay::http_endpoint endpoint({}, {{"/healthz", ok}}, large);
    const auto reply = si::test::http_get(endpoint.port(), "/api/v1/large", 10s);
    BOOST_TEST(reply.status == 200);
    BOOST_TEST(reply.body.size() == large_answer);
    BOOST_TEST((reply.body.find_first_not_of('x') == std::string::npos));
}

// Review of issue 34 (defect 4): the connections waiting for a serving thread had no bound.

BOOST_AUTO_TEST_CASE(past_the_connection_limit_a_client_gets_503_at_once_and_nothing_more_is_held) {
    constexpr std::size_t limit = 128;
    std::promise<void> release;
    const std::shared_future<void> released = release.get_future().share();
    std::atomic<int> called{0};
    si::relay::http_endpoint endpoint({}, {{"/healthz", ok}}, [&](const si::relay::http_request&) {
        ++called;
        released.wait();
        return ok();
    });
    connections held;
    const release_on_exit guard{release};
    for (std::size_t i = 0; i < limit; ++i) held.fds.push_back(ask_and_never_read(endpoint.port(), "/api/v1/slow"));
    BOOST_TEST_REQUIRE(std::ranges::count(held.fds, -1) == 0);
    BOOST_TEST_REQUIRE(slow_client::await([&] { return called.load() >= 4; }, 10s));
    std::this_thread::sleep_for(300ms);  // every request read and waiting for a serving thread
    const auto open_before = open_fds();

    for (int i = 0; i < 8; ++i) {
        const auto refused = si::test::http_get(endpoint.port(), "/api/v1/slow", 2s);
        BOOST_TEST(refused.status == 503, "request " << i << " past the limit: status " << refused.status);
    }
    std::this_thread::sleep_for(300ms);
    BOOST_TEST(endpoint.connections_held() <= limit);
    BOOST_TEST(open_fds() <= open_before + 1, "the endpoint holds " << open_fds() - open_before << " more connections");
    // service requests leave the last connections to the probes
    BOOST_TEST(si::test::http_get(endpoint.port(), "/healthz", 2s).status == 200, "no answer while the service held its share");
}

BOOST_AUTO_TEST_CASE(past_max_connections_a_new_connection_gets_503_before_its_request_is_read) {
    std::promise<void> release;
    const std::shared_future<void> released = release.get_future().share();
    std::atomic<int> called{0};
    const auto slow = [&] {
        ++called;
        released.wait();
        return ok();
    };
    si::relay::http_endpoint endpoint({}, {{"/slow", slow}}, {}, {.max_connections = 4});
    connections held;
    const release_on_exit guard{release};
    for (int i = 0; i < 4; ++i) held.fds.push_back(ask_and_never_read(endpoint.port(), "/slow"));  // one called, three waiting
    BOOST_TEST_REQUIRE(slow_client::await([&] { return called.load() == 1 && endpoint.connections_held() == 4; }, 10s));

    connections silent{{si::test::connect_loopback(endpoint.port())}};
    BOOST_TEST_REQUIRE(silent.fds[0] >= 0);
    BOOST_TEST(bytes_until_closed(silent.fds[0], 2s).has_value(), "a connection past the limit was kept without a request");
    const auto refused = si::test::http_get(endpoint.port(), "/slow", 2s);
    BOOST_TEST(refused.status == 503);
    BOOST_TEST(refused.body == "the endpoint holds 4 connections, its limit; try again\n");
    BOOST_TEST(endpoint.connections_held() == 4u);
}
