// The relay's HTTP endpoint when the process has no file descriptor left (issue 34, defect 4):
// the listener stays readable while accept fails with EMFILE, and the endpoint spun on it
// (about one CPU-second per second). Its own test program, since it lowers the process's limit.
#define BOOST_TEST_MODULE seqinbox relay http endpoint at the fd limit
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "relay/http_client.hpp"
#include "seqinbox/relay/http_endpoint.hpp"

namespace si = seqinbox;
using namespace std::chrono_literals;

namespace {

si::relay::http_response ok() { return {200, "text/plain; charset=utf-8", "ok\n"}; }

/// Uses up every file descriptor the process may open (its soft limit lowered to `limit`), and
/// gives them back, with the old limit, when the scope ends.
class exhausted_fds {
public:
    explicit exhausted_fds(rlim_t limit) {
        BOOST_TEST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &old_) == 0);
        rlimit lowered = old_;
        lowered.rlim_cur = std::min(limit, old_.rlim_cur);
        BOOST_TEST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
        for (int fd; (fd = ::fcntl(0, F_DUPFD_CLOEXEC, 0)) >= 0;) taken_.push_back(fd);
        BOOST_TEST_REQUIRE(errno == EMFILE);
    }
    ~exhausted_fds() { give_back(); }
    exhausted_fds(const exhausted_fds&) = delete;
    exhausted_fds& operator=(const exhausted_fds&) = delete;

    void give_back() {
        for (int fd : taken_) ::close(fd);
        taken_.clear();
        ::setrlimit(RLIMIT_NOFILE, &old_);
    }

private:
    rlimit old_{};
    std::vector<int> taken_;
};

/// CPU time the whole process used, in seconds.
double process_cpu_seconds() {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

/// Connects `fd` to 127.0.0.1:`port`: the kernel completes it before the endpoint accepts.
bool connect_to(int fd, std::uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(at_the_fd_limit_the_endpoint_does_not_spin_and_serves_again_once_fds_are_free) {
    si::relay::http_endpoint endpoint(0, {{"/healthz", ok}});
    const int waiting = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // before the limit: a client of its own
    BOOST_TEST_REQUIRE(waiting >= 0);
    double cpu = 0;
    {
        exhausted_fds exhausted(256);
        BOOST_TEST_REQUIRE(connect_to(waiting, endpoint.port()));  // the listener is readable; accept fails
        std::this_thread::sleep_for(200ms);
        const double before = process_cpu_seconds();
        std::this_thread::sleep_for(1s);
        cpu = process_cpu_seconds() - before;
    }
    BOOST_TEST_MESSAGE("CPU time in one second at the fd limit: " << cpu << " s");
    BOOST_TEST(cpu < 0.3, "the process used " << cpu << " s of CPU in one second while it could not accept");

    const auto probe = si::test::http_get(endpoint.port(), "/healthz", 3s);
    BOOST_TEST(probe.status == 200, "no answer within 3 s once file descriptors were free again");
    // the client that connected meanwhile is served too
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    BOOST_TEST_REQUIRE(::send(waiting, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
    const timeval patience{3, 0};
    ::setsockopt(waiting, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    char answer[64] = {};
    BOOST_TEST(::recv(waiting, answer, sizeof answer - 1, 0) > 0);
    BOOST_TEST(std::string(answer).starts_with("HTTP/1.1 200"), answer);
    ::close(waiting);
}
