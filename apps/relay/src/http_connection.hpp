#pragma once
// The pieces of seqinbox/relay/http_endpoint.hpp's I/O thread: an owned socket, a connection
// reading its request or writing its answer without blocking, and the queues between the I/O
// thread and the handler threads. Private to the endpoint.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include "seqinbox/relay/http_endpoint.hpp"

namespace seqinbox::relay::detail {

using steady = std::chrono::steady_clock;

/// A file descriptor, closed when the owner goes. Moves, never copies.
class owned_fd {
public:
    owned_fd() = default;
    explicit owned_fd(int fd) noexcept : fd_(fd) {}
    owned_fd(owned_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    owned_fd& operator=(owned_fd&& other) noexcept;
    ~owned_fd();
    owned_fd(const owned_fd&) = delete;
    owned_fd& operator=(const owned_fd&) = delete;

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept { return std::exchange(fd_, -1); }
    /// Closes with a reset: what the peer did not take is dropped now, not kept by the kernel.
    void reset_connection() noexcept;

private:
    int fd_ = -1;
};

/// A connection while its request arrives.
struct arriving {
    owned_fd client;
    steady::time_point deadline;
    std::string raw{};
    std::optional<http_response> refusal{};

    /// Reads what arrived; true once the request is complete or refused.
    bool read_some();

private:
    bool complete();
    bool refuse(int status, std::string why);
};

/// A connection while its answer leaves.
struct answering {
    owned_fd client;
    std::string bytes;
    steady::time_point deadline;
    std::size_t sent = 0;

    /// Sends what the socket takes now; true once all is sent or the client left.
    bool send_some();
};

/// A request for a handler thread, with the connection to answer.
struct call {
    owned_fd client;
    http_request request;
    bool with_body;  ///< false for HEAD
};

/// An answer for the I/O thread to write.
struct answer {
    owned_fd client;
    std::string bytes;
};

/// Items handed from one thread to another, first in first out.
template <typename T>
class handoff {
public:
    void push(T item) {
        {
            const std::lock_guard lock(mutex_);
            items_.push_back(std::move(item));
        }
        changed_.notify_one();
    }

    /// The next item; nothing once `stop` is requested.
    std::optional<T> pop(const std::stop_token& stop) {
        std::unique_lock lock(mutex_);
        if (!changed_.wait(lock, stop, [&] { return !items_.empty(); })) return std::nullopt;
        T item = std::move(items_.front());
        items_.pop_front();
        return item;
    }

    std::size_t size() {
        const std::lock_guard lock(mutex_);
        return items_.size();
    }

    /// Every item there is now, without waiting.
    std::deque<T> take_all() {
        const std::lock_guard lock(mutex_);
        return std::exchange(items_, {});
    }

private:
    std::mutex mutex_;
    std::condition_variable_any changed_;
    std::deque<T> items_;
};

}  // namespace seqinbox::relay::detail
