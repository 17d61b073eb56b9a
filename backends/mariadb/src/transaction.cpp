// store::transaction: its life (begin, commit, rollback, savepoints) and its small writes.
#include <soci/soci.h>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::bytes_literal;
using detail::time_literal;

store::transaction::impl::impl(std::shared_ptr<detail::pool> owner, detail::lease conn)
    : pool_(std::move(owner)), conn_(std::move(conn)), number_(conn_->next_transaction()) {}

store::transaction::impl::~impl() { rollback(); }

void store::transaction::impl::check_still_open(std::string_view doing) {
    if (conn_->server_in_transaction()) return;
    active_ = false;
    conn_->in_transaction = false;
    throw error(error_category::retryable,
                std::string(doing) + " on '" + redact_url(url()) +
                    "': the server rolled the transaction back (a deadlock or lock wait timeout in a statement run on its session); retry",
                "40001");
}

bool store::transaction::impl::open_for(std::string_view doing, std::vector<detail::statement>& statements) {
    if (!active_)
        throw error(error_category::misuse, std::string(doing) + ": the transaction has ended (committed, rolled back, or ended by the server)");
    if (begun_) {
        check_still_open(doing);
        return false;
    }
    statements.insert(statements.begin(), detail::statement{"BEGIN"});
    conn_->in_transaction = true;  // until COMMIT or ROLLBACK succeed: a connection given back in between is dropped
    begun_ = true;
    return true;
}

void store::transaction::impl::send(std::string_view doing, std::vector<detail::statement> statements) {
    open_for(doing, statements);
    if (statements.empty()) return;
    try {
        conn_->send(statements);
    } catch (const soci::soci_error& e) {
        fail(e, doing);
    }
}

void store::transaction::impl::run(std::string_view doing, const std::string& sql) { send(doing, {{sql}}); }

void store::transaction::impl::rows(std::string_view doing, const std::string& sql, const std::function<void(const detail::row&)>& each) {
    send(doing, {{sql, each}});
}

long long store::transaction::impl::affected(std::string_view doing, const std::string& sql) {
    long long count = 0;
    send(doing, {{sql, {}, &count}});
    return count;
}

void store::transaction::impl::fail(const soci::soci_error& e, std::string_view doing) {
    if (detail::ends_session(e)) {
        conn_->mark_broken();
        active_ = false;
    } else if (detail::ends_transaction(e)) {
        active_ = false;
        conn_->in_transaction = false;
    } else if (detail::error_number(e) == 1205) {
        rollback();  // InnoDB rolled back the statement alone: the rest goes too, so that a retry starts clean
    }
    detail::rethrow(e, doing, url());
}

void store::transaction::impl::commit() {
    if (!active_) throw error(error_category::misuse, "commit: the transaction has ended (committed, rolled back, or ended by the server)");
    if (!begun_ && at_commit.empty()) {
        active_ = false;
        return;
    }
    // The statements kept for the commit and COMMIT itself: one round trip (BEGIN first when
    // nothing was sent yet). A statement's failure names what it was doing; the outcome of a
    // COMMIT whose connection was lost is unknown, and the delivery is retried.
    const auto kept = std::move(at_commit);
    at_commit.clear();
    std::vector<detail::statement> statements;
    for (const auto& [doing, statement] : kept) statements.push_back(statement);
    statements.push_back({"COMMIT"});
    const std::size_t first_kept = open_for("committing", statements) ? 1 : 0;
    try {
        conn_->send(statements);
    } catch (const soci::soci_error& e) {
        const std::size_t failed = conn_->failed_statement();
        try {
            fail(e, failed >= first_kept && failed - first_kept < kept.size() ? std::string_view(kept[failed - first_kept].first) : "committing");
        } catch (...) {
            rollback();  // a failed commit leaves nothing behind: the kept statements are gone with it
            throw;
        }
    }
    conn_->in_transaction = false;
    active_ = false;
}

void store::transaction::impl::rollback() noexcept {
    if (!active_) return;
    active_ = false;
    at_commit.clear();
    if (!begun_) return;
    try {
        conn_->run("ROLLBACK");
        conn_->in_transaction = false;
    } catch (const soci::soci_error&) {
        conn_->mark_broken();  // the server ends the transaction with the connection
    }
}

store::transaction::transaction(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
store::transaction::transaction(transaction&&) noexcept = default;
store::transaction& store::transaction::operator=(transaction&&) noexcept = default;
store::transaction::~transaction() = default;

void store::transaction::commit() { impl_->commit(); }
void store::transaction::rollback() { impl_->rollback(); }
bool store::transaction::active() const noexcept { return impl_ && impl_->active(); }
std::uint64_t store::transaction::id() { return impl_->id(); }

soci::session& store::transaction::session() {
    impl_->begin("opening the transaction for a listener");
    try {
        impl_->conn().allow_several_statements(false);
    } catch (const soci::soci_error& e) {
        impl_->fail(e, "handing the session to a listener");
    }
    return impl_->conn().session();
}

store::savepoint_id store::transaction::savepoint() {
    const auto point = impl_->next_savepoint();
    impl_->run("making a savepoint", "SAVEPOINT seqinbox_" + std::to_string(point));
    return point;
}

void store::transaction::rollback_to(savepoint_id point) {
    impl_->run("rolling back to a savepoint", "ROLLBACK TO SAVEPOINT seqinbox_" + std::to_string(point));
}

void store::transaction::release(savepoint_id point) {
    impl_->run("releasing a savepoint", "RELEASE SAVEPOINT seqinbox_" + std::to_string(point));
}

void store::transaction::delete_claim(const claim_key& key) {
    // A plain read first: a DELETE would wait for another transaction's uncommitted claim of the
    // key, which the contract says it neither sees nor waits for (PostgreSQL's DELETE skips it).
    bool committed = false;
    impl_->rows("deleting a claim", "SELECT 1 FROM sequential_inbox_idempotence WHERE " + detail::key_condition(key),
                [&](const detail::row&) { committed = true; });
    if (committed) impl_->run("deleting a claim", "DELETE FROM sequential_inbox_idempotence WHERE " + detail::key_condition(key));
}

void store::transaction::update_message_state(message_id id, message_state state, timestamp now) {
    impl_->run("changing the state of message " + std::to_string(id),
               "UPDATE sequenced_message SET state = '" + std::string(detail::state_text(state)) + "', state_changed_at = " +
                   time_literal(now) + " WHERE id = " + std::to_string(id));
}

void store::transaction::close_instance(instance_id instance, timestamp now) {
    if (!impl_->active()) throw error(error_category::misuse, "close_instance: the transaction has ended");
    impl_->at_commit.emplace_back("closing sequence instance " + std::to_string(instance),
                                  detail::statement{"UPDATE sequence_instance SET state = 'CLOSED', closed_at = " + time_literal(now) +
                                      " WHERE id = " + std::to_string(instance) + " AND state = 'OPEN'"});
}

}  // namespace seqinbox::mariadb
