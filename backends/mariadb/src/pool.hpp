#pragma once
// Private to seqinbox::mariadb: pooled connections. The pool opens connections lazily up to
// pool_size, hands them out one transaction at a time, and drops a connection that is broken or
// was left inside a transaction, so the next lease opens a fresh one.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <soci/soci.h>

#include "result_row.hpp"
#include "seqinbox/detail/instance_cache.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace seqinbox::mariadb::detail {

struct counters {
    std::atomic<std::uint64_t> round_trips{0}, connections_opened{0}, connections_replaced{0};
    /// max_query_bytes for a session opened now (the server's max_allowed_packet as last read;
    /// 0 before the first): a session keeps the value it was opened with.
    std::atomic<std::size_t> newest_max_query_bytes{0};
};

/// The longest query a session of `max_allowed_packet` may send.
std::size_t query_bytes_for(std::size_t max_allowed_packet) noexcept;

/// A SOCI session with what the store knows of it.
class connection {
public:
    connection(const store_options& options, counters& counts);
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    soci::session& session() { return *session_; }
    /// Sends `statements` as one multi-statement query: one round trip, or as many as it takes
    /// to keep every query within max_query_bytes(). The server runs them in order and stops at
    /// the first that fails, whose error is thrown as soci::mysql_soci_error (which one:
    /// failed_statement()); the results of those before it have been handed out. A statement
    /// longer than max_query_bytes() is never sent: its error (1153) is thrown first.
    void send(std::span<const statement> statements);
    /// The longest query the server accepts on this session: its max_allowed_packet, read when
    /// the connection was opened, less a margin.
    std::size_t max_query_bytes() const noexcept { return max_query_bytes_; }
    /// The longest list of values a multi-row statement may carry: max_query_bytes() less room
    /// for the statement around it.
    std::size_t max_list_bytes() const noexcept;
    /// The server's max_allowed_packet, as read when the connection was opened.
    std::size_t max_allowed_packet() const noexcept { return max_allowed_packet_; }
    /// The index in the last send() of the statement that failed.
    std::size_t failed_statement() const noexcept { return failed_statement_; }
    /// Turns the server's multi-statement option on or off for the session (a round trip when it
    /// changes): on for the store's sends, off while a listener has the session.
    void allow_several_statements(bool allow);
    /// send() of one statement: no result rows; every row to `each`; the affected-row count
    /// (found rows: SOCI connects with CLIENT_FOUND_ROWS).
    void run(const std::string& sql);
    void rows(const std::string& sql, const std::function<void(const row&)>& each);
    long long affected(const std::string& sql);
    void count_round_trip() { counts_->round_trips.fetch_add(1, std::memory_order_relaxed); }

    /// CONNECTION_ID() of the session.
    std::uint64_t server_id() const noexcept { return server_id_; }
    /// innodb_flush_log_at_trx_commit as read when the connection was opened.
    int flush_setting() const noexcept { return flush_setting_; }
    /// The number of the next transaction on this connection.
    std::uint32_t next_transaction() noexcept { return ++transactions_; }

    /// Whether the server reports a transaction open on the session, as of the last reply (no
    /// round trip): false after the server rolled one back (a deadlock, also in a listener's own
    /// statement) while the store thought it open.
    bool server_in_transaction() const;

    /// Whether the server ended the session while it was idle (an operator's KILL, wait_timeout,
    /// a restart): it then sent an error or closed the socket, which is readable. No round trip.
    bool ended_while_idle() const noexcept;
    /// Whether max_allowed_packet was raised since the session was opened (which keeps its value).
    bool predates_a_raise() const noexcept {
        return max_query_bytes_ < counts_->newest_max_query_bytes.load(std::memory_order_relaxed);
    }

    void mark_broken() noexcept { broken_ = true; }
    bool broken() const noexcept { return broken_; }
    /// Set while a transaction is open on the connection (BEGIN sent, no COMMIT or ROLLBACK yet).
    bool in_transaction = false;

private:
    /// How many of the first `statements` fit together in one query (at least one).
    std::size_t fitting_together(std::span<const statement> statements) const noexcept;
    /// Throws ER_NET_PACKET_TOO_LARGE for the first of `statements` longer than a query may be.
    void check_each_fits(std::span<const statement> statements);
    /// `statements` in one query; `first` is the index of the first in the caller's send().
    void send_together(std::span<const statement> statements, std::size_t first);

    counters* counts_;
    std::unique_ptr<soci::session> session_;
    std::uint64_t server_id_ = 0;
    int flush_setting_ = 1;
    std::uint32_t transactions_ = 0;
    std::size_t failed_statement_ = 0;
    std::size_t max_allowed_packet_ = 16 * 1024 * 1024;  // MariaDB's default, until read
    std::size_t max_query_bytes_ = max_allowed_packet_;
    bool several_ = false;
    bool broken_ = false;
};

class pool;

/// A leased connection; returns it to the pool when destroyed.
class lease {
public:
    lease() = default;
    lease(std::shared_ptr<pool> owner, std::unique_ptr<connection> conn) : pool_(std::move(owner)), conn_(std::move(conn)) {}
    lease(lease&&) noexcept = default;
    lease& operator=(lease&& other) noexcept {
        if (this != &other) {
            release();
            pool_ = std::move(other.pool_);
            conn_ = std::move(other.conn_);
        }
        return *this;
    }
    ~lease() { release(); }
    connection* operator->() const { return conn_.get(); }
    connection& operator*() const { return *conn_; }
    explicit operator bool() const { return conn_ != nullptr; }
    void release() noexcept;

private:
    std::shared_ptr<pool> pool_;
    std::unique_ptr<connection> conn_;
};

class pool : public std::enable_shared_from_this<pool> {
public:
    explicit pool(store_options options);
    /// A connection within options.acquire_timeout, or seqinbox::error (retryable when all are
    /// busy, connection when a new one cannot be opened).
    lease acquire();
    void give_back(std::unique_ptr<connection> conn) noexcept;
    const store_options& options() const noexcept { return options_; }
    counters& counts() noexcept { return counts_; }
    seqinbox::detail::instance_cache& instances() noexcept { return instances_; }
    /// A token no claim statement of this process used before (claims.cpp).
    long long next_claim_token() noexcept;
    bool durable_commits = true;
    /// max_query_bytes() of a session opened now (0 before the first).
    std::size_t max_query_bytes() const noexcept { return counts_.newest_max_query_bytes.load(std::memory_order_relaxed); }
    /// Reads the server's max_allowed_packet again (one round trip): a raise reaches new sessions
    /// only, and the pool then replaces its idle sessions opened before it.
    void refresh_max_query_bytes();

private:
    /// An idle connection, or nullptr with a place reserved for a new one (open_new).
    std::unique_ptr<connection> take_idle_or_place();
    lease open_new();
    /// Closes `conn`, broken or ended, and frees its place in the pool.
    void drop(std::unique_ptr<connection> conn) noexcept;

    const store_options options_;
    counters counts_;
    seqinbox::detail::instance_cache instances_;
    std::atomic<unsigned long long> token_;
    std::mutex mutex_;
    std::condition_variable available_;
    std::vector<std::unique_ptr<connection>> idle_;
    std::size_t open_ = 0;  // idle plus leased
};

/// Rethrows a SOCI failure of `conn` as seqinbox::error, first marking the connection broken
/// when it was lost.
[[noreturn]] void fail(connection& conn, const soci::soci_error& e, std::string_view doing, std::string_view url);

}  // namespace seqinbox::mariadb::detail
