#pragma once
// Private to seqinbox::postgresql: pooled connections. A connection is a SOCI session plus its
// prepared statements; the pool opens connections lazily up to pool_size, hands them out one
// transaction at a time, and drops a connection that is broken or was left inside a transaction,
// so the next lease opens a fresh one.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <soci/soci.h>

#include "seqinbox/postgresql/store.hpp"
#include "instance_cache.hpp"
#include "pipeline.hpp"
#include "statements.hpp"

namespace seqinbox::postgresql::detail {

struct counters {
    std::atomic<std::uint64_t> round_trips{0}, connections_opened{0}, connections_replaced{0}, unflushed_commits{0};

    void count_unflushed_commit() noexcept { unflushed_commits.fetch_add(1, std::memory_order_relaxed); }
};

class connection {
public:
    connection(const store_options& options, counters& counts);
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    soci::session& session() { return *session_; }
    /// Where this connection's SOCI statements are made (unnamed through a transaction pooler).
    statement_site site() { return {*session_, rules_.unnamed}; }

    /// The prepared statement S of this connection, prepared on first use (unnamed statements
    /// need no round trip of their own).
    template <class S>
    S& statement() {
        auto& slot = std::get<std::unique_ptr<S>>(statements_);
        if (!slot) {
            if (!rules_.unnamed) counts_->round_trips.fetch_add(1, std::memory_order_relaxed);
            slot = std::make_unique<S>(site());
        }
        return *slot;
    }

    void count_round_trip() { counts_->round_trips.fetch_add(1, std::memory_order_relaxed); }

    /// An empty batch on this connection: its statements travel in one round trip.
    pipeline batch();

    /// Marks the connection unusable after a lost connection: the pool will drop it.
    void mark_broken() noexcept { broken_ = true; }
    /// Connected and outside any transaction: safe to hand to the next transaction.
    bool reusable() const;
    /// libpq has not seen the connection fail (known locally, no round trip).
    bool connected() const noexcept;
    /// Inside a transaction that a failed statement aborted (known locally, no round trip).
    bool in_failed_transaction() const;

private:
    counters* counts_;
    sending_rules rules_;
    bool broken_ = false;
    bool server_ended_session_ = false;  // a FATAL message arrived; the server closes the socket next
    std::unique_ptr<soci::session> session_;
    std::set<std::string> batch_statements_;  // named_sql prepared on this session
    // Declared after the session: statements are destroyed before it.
    std::tuple<std::unique_ptr<instance_upsert>, std::unique_ptr<message_insert>,
               std::unique_ptr<message_insert_with_record>, std::unique_ptr<message_store>,
               std::unique_ptr<transaction_id_query>>
        statements_;
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
    /// The store's instances by (sequence, context id), shared by its transactions.
    instance_cache& instances() noexcept { return instances_; }

private:
    const store_options options_;
    counters counts_;
    instance_cache instances_;
    std::mutex mutex_;
    std::condition_variable available_;
    std::vector<std::unique_ptr<connection>> idle_;
    std::size_t open_ = 0;  // idle plus leased
};

/// Rethrows a SOCI failure of `conn` as seqinbox::error, first marking the connection broken
/// when it was lost.
[[noreturn]] void fail(connection& conn, const soci::soci_error& e, std::string_view doing, std::string_view conninfo);

}  // namespace seqinbox::postgresql::detail
