#include "pool.hpp"

#include <poll.h>

#include <string>

#include <soci/postgresql/soci-postgresql.h>

#include "connection.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::postgresql::detail {

namespace {

/// idle_in_transaction_session_timeout in ms, or nullopt to keep the server's.
parameter idle_timeout_ms(const store_options& options) {
    if (options.idle_in_transaction_timeout.count() < 0) return std::nullopt;
    return std::to_string(std::chrono::milliseconds(options.idle_in_transaction_timeout).count());
}

/// The session settings every pooled connection carries: SET once on a direct connection (no
/// round trip per transaction), SET LOCAL by each transaction through a transaction pooler,
/// where a session's settings would stay behind on a server connection others then use.
sending_rules rules_for(const store_options& options) {
    if (options.through == pooler::none) return {};
    return {true, &local_settings_sql(), {idle_timeout_ms(options), std::to_string(options.lock_timeout.count())}};
}

/// Values are integers formatted here, never user text.
void apply_settings(soci::session& session, const store_options& options, const std::string& conninfo) {
    if (options.through != pooler::none) return;
    try {
        if (const auto idle = idle_timeout_ms(options)) session << "SET idle_in_transaction_session_timeout = " + *idle;
        session << "SET lock_timeout = " + std::to_string(options.lock_timeout.count());
    } catch (const soci::soci_error& e) {
        rethrow(e, "configuring a new connection", conninfo);
    }
}

PGconn* native(soci::session& session) {
    return static_cast<soci::postgresql_session_backend*>(session.get_backend())->conn_;
}

/// libpq reports a FATAL message that arrives outside a query (pg_terminate_backend, the idle
/// timeout) as a notice, and the socket may stay open a moment longer while the server process
/// exits and releases its locks: the message itself is the earliest sign of the lost session.
void note_fatal_message(void* ended, const PGresult* message) {
    const char* severity = PQresultErrorField(message, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity && (std::string_view(severity) == "FATAL" || std::string_view(severity) == "PANIC"))
        *static_cast<bool*>(ended) = true;
}

/// Whether `socket` has bytes or an end of stream to read, without waiting.
bool readable(int socket) {
    pollfd p{socket, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;  // an error counts as readable: the reads find out
}

}  // namespace

connection::connection(const store_options& options, counters& counts)
    : counts_(&counts), rules_(rules_for(options)), session_(connect(options.conninfo)) {
    PQsetNoticeReceiver(native(*session_), note_fatal_message, &server_ended_session_);
    apply_settings(*session_, options, options.conninfo);
    counts.connections_opened.fetch_add(1, std::memory_order_relaxed);
}

bool connection::reusable() const {
    if (broken_ || server_ended_session_) return false;
    PGconn* conn = native(*session_);
    return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE;
}

// Reading what already arrived (no round trip) reveals a server that ended the session, e.g.
// pg_terminate_backend or the idle-in-transaction timeout while a listener ran. When nothing
// arrived, one poll says so for the price of one of those reads.
bool connection::connected() const noexcept {
    if (broken_) return false;
    PGconn* conn = native(*session_);
    if (PQstatus(conn) == CONNECTION_OK && !server_ended_session_ && !readable(PQsocket(conn))) return true;
    // The first read may return the server's FATAL message, a later one the end of the stream.
    for (int reads = 0; reads < 3 && PQstatus(conn) == CONNECTION_OK && !server_ended_session_; ++reads)
        if (PQconsumeInput(conn) == 0) break;
    return PQstatus(conn) == CONNECTION_OK && !server_ended_session_;
}

pipeline connection::batch() { return {native(*session_), batch_statements_, rules_}; }

bool connection::in_failed_transaction() const { return PQtransactionStatus(native(*session_)) == PQTRANS_INERROR; }

void lease::release() noexcept {
    if (conn_) pool_->give_back(std::move(conn_));
    pool_.reset();
}

pool::pool(store_options options) : options_(std::move(options)), instances_(options_.instance_cache_size) {
    if (options_.pool_size == 0) throw error(error_category::misuse, "seqinbox::postgresql::store_options::pool_size must be at least 1");
    if (options_.conninfo.empty()) throw error(error_category::misuse, "seqinbox::postgresql::store_options::conninfo is empty");
}

lease pool::acquire() {
    std::unique_lock lock(mutex_);
    const bool free = available_.wait_for(lock, options_.acquire_timeout,
                                          [this] { return !idle_.empty() || open_ < options_.pool_size; });
    if (!free)
        throw error(error_category::retryable,
                    "all " + std::to_string(options_.pool_size) + " pooled PostgreSQL connections stayed busy for " +
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
    bool keep = false;
    try {
        keep = conn->reusable();
    } catch (...) {
    }
    if (!keep) {
        counts_.connections_replaced.fetch_add(1, std::memory_order_relaxed);
        // The server may have crashed, failed over or been restored: the ids it gave may have
        // gone with it and been given again to other instances.
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

void fail(connection& conn, const soci::soci_error& e, std::string_view doing, std::string_view conninfo) {
    try {
        rethrow(e, doing, conninfo);
    } catch (const error& failure) {
        if (failure.category() == error_category::connection) conn.mark_broken();
        throw;
    }
}

}  // namespace seqinbox::postgresql::detail
