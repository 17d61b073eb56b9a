#include "pool.hpp"

#include <errmsg.h>
#include <poll.h>

#include <random>

#include <mysqld_error.h>

#include <soci/mysql/soci-mysql.h>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"
#include "store_parts.hpp"

namespace seqinbox::mariadb::detail {

namespace {

MYSQL* native(soci::session& session) { return static_cast<soci::mysql_session_backend*>(session.get_backend())->conn_; }

[[noreturn]] void throw_client_error(MYSQL* my) { throw soci::mysql_soci_error(mysql_error(my), static_cast<int>(mysql_errno(my))); }

/// Hands the current result of `my` to `s`: its rows, or its affected-row count.
void take_result(MYSQL* my, const statement& s) {
    MYSQL_RES* result = mysql_store_result(my);
    if (result == nullptr) {
        if (mysql_field_count(my) != 0) throw_client_error(my);  // rows were due and did not come
        if (s.affected != nullptr) *s.affected = static_cast<long long>(mysql_affected_rows(my));
        return;
    }
    const std::unique_ptr<MYSQL_RES, void (*)(MYSQL_RES*)> owned(result, mysql_free_result);
    const std::size_t columns = mysql_num_fields(result);
    while (MYSQL_ROW values = mysql_fetch_row(result))
        if (s.each) s.each(row(values, mysql_fetch_lengths(result), columns));
}

// The server counts the command byte and the packet header against max_allowed_packet too, and a
// margin keeps clear of any other byte it counts.
constexpr std::size_t query_margin = 1024;
// What a multi-row statement holds besides its list of values (the longest: the message read's
// column list).
constexpr std::size_t statement_room = 4096;

/// Reads and drops what the server still sends after an exception left a send unfinished.
void drain(MYSQL* my) noexcept {
    while (mysql_next_result(my) == 0)
        if (MYSQL_RES* rest = mysql_store_result(my)) mysql_free_result(rest);
}

}  // namespace

std::size_t query_bytes_for(std::size_t max_allowed_packet) noexcept {
    return max_allowed_packet > 2 * query_margin ? max_allowed_packet - query_margin : max_allowed_packet / 2;
}

connection::connection(const store_options& options, counters& counts)
    : counts_(&counts), session_(connect(options.url, options.lock_wait_timeout)) {
    counts.connections_opened.fetch_add(1, std::memory_order_relaxed);
    try {
        allow_several_statements(true);
        rows("SELECT CONNECTION_ID(), @@innodb_flush_log_at_trx_commit, @@max_allowed_packet", [this](const row& r) {
            server_id_ = static_cast<std::uint64_t>(number_at(r, 0));
            flush_setting_ = static_cast<int>(number_at(r, 1));
            max_allowed_packet_ = static_cast<std::size_t>(number_at(r, 2));
            max_query_bytes_ = query_bytes_for(max_allowed_packet_);
        });
        counts.newest_max_query_bytes.store(max_query_bytes_, std::memory_order_relaxed);
    } catch (const soci::soci_error& e) {
        rethrow(e, "setting up the new connection", options.url);
    }
}

// Several statements in one round trip (send()): every value in them is a literal this store wrote
// (codec.hpp), never a caller's text. A listener's session (store::transaction::session) runs one
// statement per query, so that SQL it concatenated cannot carry a second one.
void connection::allow_several_statements(bool allow) {
    if (several_ == allow) return;
    count_round_trip();
    if (mysql_set_server_option(native(*session_), allow ? MYSQL_OPTION_MULTI_STATEMENTS_ON : MYSQL_OPTION_MULTI_STATEMENTS_OFF) != 0)
        throw_client_error(native(*session_));
    several_ = allow;
}

std::size_t connection::max_list_bytes() const noexcept {
    return max_query_bytes_ > 2 * statement_room ? max_query_bytes_ - statement_room : max_query_bytes_ / 2;
}

// A query larger than max_allowed_packet is refused by the server (1153), which then closes the
// connection: the same work failed so every time it came again. So statements go in as many
// queries as it takes, and one that no query can carry is not sent.
void connection::send(std::span<const statement> statements) {
    if (statements.empty()) return;
    failed_statement_ = 0;
    check_each_fits(statements);
    for (std::size_t first = 0; first < statements.size();) {
        const std::size_t together = fitting_together(statements.subspan(first));
        send_together(statements.subspan(first, together), first);
        first += together;
    }
}

std::size_t connection::fitting_together(std::span<const statement> statements) const noexcept {
    std::size_t length = statements.front().sql.size(), count = 1;
    for (; count < statements.size(); ++count) {
        length += 2 + statements[count].sql.size();  // ";\n" before it
        if (length > max_query_bytes_) break;
    }
    return count;
}

void connection::check_each_fits(std::span<const statement> statements) {
    for (std::size_t i = 0; i < statements.size(); ++i) {
        const std::size_t length = statements[i].sql.size();
        if (length <= max_query_bytes_) continue;
        failed_statement_ = i;
        if (length <= counts_->newest_max_query_bytes.load(std::memory_order_relaxed)) {
            broken_ = true;  // a session opened now carries it: the pool replaces this one
            throw soci::mysql_soci_error("this session was opened before max_allowed_packet was raised (" +
                                             std::to_string(max_allowed_packet_) + " for it) and cannot send a statement of " +
                                             std::to_string(length) + " bytes; a new session can",
                                         CR_SERVER_LOST);
        }
        throw soci::mysql_soci_error("a statement of " + std::to_string(length) + " bytes, more than the " +
                                         std::to_string(max_query_bytes_) + " bytes one query may carry on this server (max_allowed_packet " +
                                         std::to_string(max_allowed_packet_) +
                                         "); the store writes every value as hex, twice its size: a record must stay under about " +
                                         std::to_string(max_query_bytes_ / 2) + " bytes, or max_allowed_packet be raised",
                                     ER_NET_PACKET_TOO_LARGE);
    }
}

void connection::send_together(std::span<const statement> statements, std::size_t first) {
    if (statements.size() > 1) allow_several_statements(true);
    count_round_trip();
    std::string text;
    for (const auto& s : statements) (text += text.empty() ? "" : ";\n") += s.sql;
    MYSQL* my = native(*session_);
    if (mysql_real_query(my, text.data(), text.size()) != 0) {
        failed_statement_ = first;
        if (mysql_errno(my) == ER_NET_PACKET_TOO_LARGE) broken_ = true;  // the server closes the connection after it
        throw_client_error(my);
    }
    for (std::size_t i = 0;;) {
        failed_statement_ = first + i;  // should reading its result fail
        try {
            take_result(my, statements[i]);
        } catch (...) {
            drain(my);
            throw;
        }
        const int next = mysql_next_result(my);
        if (next < 0) return;
        ++i;
        if (next > 0) {
            failed_statement_ = first + i;
            throw_client_error(my);
        }
        if (i == statements.size()) {  // more results than statements: a statement held a ';'
            drain(my);
            throw soci::mysql_soci_error("more results than statements sent (a statement contained ';')", 0);
        }
    }
}

void connection::run(const std::string& sql) {
    const statement s{sql};
    send({&s, 1});
}

void connection::rows(const std::string& sql, const std::function<void(const row&)>& each) {
    const statement s{sql, each};
    send({&s, 1});
}

long long connection::affected(const std::string& sql) {
    long long count = 0;
    const statement s{sql, {}, &count};
    send({&s, 1});
    return count;
}

bool connection::ended_while_idle() const noexcept {
    pollfd socket{static_cast<int>(mysql_get_socket(native(*session_))), POLLIN, 0};
    return ::poll(&socket, 1, 0) != 0;  // an idle session is sent nothing: anything there ends it
}

bool connection::server_in_transaction() const {
    unsigned int status = 0;
    if (mariadb_get_infov(native(*session_), MARIADB_CONNECTION_SERVER_STATUS, &status) != 0) return false;
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

// An idle session the server ended is dropped and another taken: a relay idle past wait_timeout
// (8 hours by default) would otherwise fail a delivery per pooled session before it got through.
lease pool::acquire() {
    for (;;) {
        std::unique_ptr<connection> idle = take_idle_or_place();
        if (!idle) return open_new();
        if (!idle->ended_while_idle() && !idle->predates_a_raise()) return {shared_from_this(), std::move(idle)};
        drop(std::move(idle));
    }
}

std::unique_ptr<connection> pool::take_idle_or_place() {
    std::unique_lock lock(mutex_);
    const bool free = available_.wait_for(lock, options_.acquire_timeout,
                                          [this] { return !idle_.empty() || open_ < options_.pool_size; });
    if (!free)
        throw error(error_category::retryable,
                    "all " + std::to_string(options_.pool_size) + " pooled MariaDB connections stayed busy for " +
                        std::to_string(options_.acquire_timeout.count()) +
                        " ms; raise store_options::pool_size (a requires_new step needs a second connection per "
                        "consumer thread) or acquire_timeout");
    if (idle_.empty()) {
        ++open_;
        return nullptr;
    }
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    return conn;
}

lease pool::open_new() {
    try {
        return {shared_from_this(), std::make_unique<connection>(options_, counts_)};
    } catch (...) {
        std::lock_guard lock(mutex_);
        --open_;
        available_.notify_one();
        throw;
    }
}

void pool::refresh_max_query_bytes() {
    autocommitted(*this, "reading max_allowed_packet", [&](connection& c) {
        c.rows("SELECT @@GLOBAL.max_allowed_packet", [&](const row& r) {
            counts_.newest_max_query_bytes.store(query_bytes_for(static_cast<std::size_t>(number_at(r, 0))), std::memory_order_relaxed);
        });
        return 0;
    });
}

void pool::give_back(std::unique_ptr<connection> conn) noexcept {
    if (conn->broken() || conn->in_transaction) return drop(std::move(conn));
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(conn));
    available_.notify_one();
}

void pool::drop(std::unique_ptr<connection> conn) noexcept {
    counts_.connections_replaced.fetch_add(1, std::memory_order_relaxed);
    // The server may have crashed or been restored: the ids it gave may have gone with it.
    instances_.clear();
    conn.reset();  // outside the lock: closing a socket may take time
    std::lock_guard lock(mutex_);
    --open_;
    available_.notify_one();
}

void fail(connection& conn, const soci::soci_error& e, std::string_view doing, std::string_view url) {
    if (ends_session(e)) conn.mark_broken();
    rethrow(e, doing, url);
}

}  // namespace seqinbox::mariadb::detail
