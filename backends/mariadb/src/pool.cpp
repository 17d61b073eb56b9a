#include "pool.hpp"

#include <random>

#include <soci/mysql/soci-mysql.h>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::mariadb::detail {

connection::connection(const store_options& options, counters& counts)
    : counts_(&counts), session_(connect(options.url, options.lock_wait_timeout)) {
    counts.connections_opened.fetch_add(1, std::memory_order_relaxed);
    try {
        rows("SELECT CONNECTION_ID(), @@innodb_flush_log_at_trx_commit", [this](const soci::row& row) {
            server_id_ = static_cast<std::uint64_t>(number_at(row, 0));
            flush_setting_ = static_cast<int>(number_at(row, 1));
        });
    } catch (const soci::soci_error& e) {
        rethrow(e, "reading the new connection's id", options.url);
    }
}

void connection::run(const std::string& sql) {
    count_round_trip();
    *session_ << sql;
}

void connection::rows(const std::string& sql, const std::function<void(const soci::row&)>& each) {
    count_round_trip();
    soci::rowset<soci::row> result = (session_->prepare << sql);
    for (const soci::row& row : result) each(row);
}

long long connection::affected(const std::string& sql) {
    count_round_trip();
    soci::statement st = (session_->prepare << sql);
    st.execute(true);
    return st.get_affected_rows();
}

bool connection::server_in_transaction() const {
    MYSQL* native = static_cast<soci::mysql_session_backend*>(session_->get_backend())->conn_;
    unsigned int status = 0;
    if (mariadb_get_infov(native, MARIADB_CONNECTION_SERVER_STATUS, &status) != 0) return false;
    return (status & SERVER_STATUS_IN_TRANS) != 0;
}

void lease::release() noexcept {
    if (conn_) pool_->give_back(std::move(conn_));
    pool_.reset();
}

pool::pool(store_options options) : options_(std::move(options)), instances_(options_.instance_cache_size) {
    if (options_.pool_size == 0) throw error(error_category::misuse, "seqinbox::mariadb::store_options::pool_size must be at least 1");
    if (options_.url.empty()) throw error(error_category::misuse, "seqinbox::mariadb::store_options::url is empty");
    std::random_device seed;
    token_ = (static_cast<unsigned long long>(seed()) << 32) ^ seed();
}

long long pool::next_claim_token() noexcept {
    // A random start per store and a counter: tokens of one store never repeat, and two stores'
    // ranges meet with odds of about (claims made) / 2^63.
    return static_cast<long long>(token_.fetch_add(1, std::memory_order_relaxed) & 0x7fffffffffffffffULL);
}

lease pool::acquire() {
    std::unique_lock lock(mutex_);
    const bool free = available_.wait_for(lock, options_.acquire_timeout,
                                          [this] { return !idle_.empty() || open_ < options_.pool_size; });
    if (!free)
        throw error(error_category::retryable,
                    "all " + std::to_string(options_.pool_size) + " pooled MariaDB connections stayed busy for " +
                        std::to_string(options_.acquire_timeout.count()) +
                        " ms; raise store_options::pool_size (a requires_new step needs a second connection per "
                        "consumer thread) or acquire_timeout");
    if (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        return {shared_from_this(), std::move(conn)};
    }
    ++open_;
    lock.unlock();
    try {
        return {shared_from_this(), std::make_unique<connection>(options_, counts_)};
    } catch (...) {
        lock.lock();
        --open_;
        available_.notify_one();
        throw;
    }
}

void pool::give_back(std::unique_ptr<connection> conn) noexcept {
    const bool keep = !conn->broken() && !conn->in_transaction;
    if (!keep) {
        counts_.connections_replaced.fetch_add(1, std::memory_order_relaxed);
        // The server may have crashed or been restored: the ids it gave may have gone with it.
        instances_.clear();
        conn.reset();  // outside the lock: closing a socket may take time
    }
    std::lock_guard lock(mutex_);
    if (keep)
        idle_.push_back(std::move(conn));
    else
        --open_;
    available_.notify_one();
}

void fail(connection& conn, const soci::soci_error& e, std::string_view doing, std::string_view url) {
    if (lost_connection(e)) conn.mark_broken();
    rethrow(e, doing, url);
}

}  // namespace seqinbox::mariadb::detail
