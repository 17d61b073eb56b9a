// The relay's loopback HTTP endpoint on its own: a client that dribbles its request neither holds
// /healthz nor stays connected past the request deadline, and a slow handler of one path does not
// hold another path. The bounds below are liveness bounds (the bug made a probe wait 20 s and
// more), not speed requirements.
#define BOOST_TEST_MODULE seqinbox relay http endpoint
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
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
