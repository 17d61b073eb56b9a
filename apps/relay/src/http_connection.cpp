#include "http_connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "http_message.hpp"

namespace seqinbox::relay::detail {

namespace {

constexpr std::size_t max_request_head = 8192;
constexpr std::size_t max_request_body = 64 * 1024;

bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK; }

}  // namespace

owned_fd& owned_fd::operator=(owned_fd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

owned_fd::~owned_fd() {
    if (fd_ >= 0) ::close(fd_);
}

void owned_fd::reset_connection() noexcept {
    const linger at_once{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &at_once, sizeof at_once);
    ::close(std::exchange(fd_, -1));
}

bool arriving::read_some() {
    char buffer[4096];
    for (;;) {
        const auto n = ::recv(client.get(), buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block()) return false;  // nothing more for now
        if (n <= 0) return complete() || refuse(400, "the request ended before it was complete\n");
        raw.append(buffer, static_cast<std::size_t>(n));
        if (complete()) return true;
    }
}

bool arriving::complete() {
    if (refusal) return true;
    const auto head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) return raw.size() > max_request_head && refuse(431, "the request head is larger than 8 KiB\n");
    if (head_end > max_request_head) return refuse(431, "the request head is larger than 8 KiB\n");
    const auto headers = headers_of(std::string_view(raw).substr(0, head_end));
    if (!headers) return refuse(400, "malformed header line\n");
    if (chunked(*headers)) return refuse(411, "a request body needs a Content-Length (no Transfer-Encoding)\n");
    const auto length = content_length(*headers);
    if (!length) return refuse(400, "malformed Content-Length\n");
    if (*length > max_request_body) return refuse(413, "the request body is larger than 64 KiB\n");
    return raw.size() >= head_end + 4 + *length;
}

bool arriving::refuse(int status, std::string why) {
    refusal = text(status, std::move(why));
    return true;
}

bool answering::send_some() {
    while (sent < bytes.size()) {
        const auto n = ::send(client.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block()) return false;
        if (n <= 0) return true;  // the client left: nothing to tell it
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace seqinbox::relay::detail
