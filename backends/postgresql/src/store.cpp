#include "seqinbox/postgresql/store.hpp"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>

#include <soci/postgresql/soci-postgresql.h>

#include "codec.hpp"
#include "connection.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/store/storable_text.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::from_microseconds;
using detail::to_microseconds;

/// The engine rejects such values before they reach a store; this guards direct callers.
void require_key(std::string_view what, std::string_view value) {
    if (auto problem = key_problem(what, value); !problem.empty()) throw error(error_category::bad_message, problem);
}

void require_claim_key(const claim_key& key) {
    require_key("message type", key.type);
    require_key("idempotence id", key.idempotence_id);
}

void require_text(std::string_view what, std::string_view value) {
    if (auto problem = text_problem(what, value); !problem.empty()) throw error(error_category::bad_message, problem);
}

message_state parse_message_state(const std::string& text) {
    for (auto s : {message_state::waiting, message_state::processed, message_state::failed})
        if (text == to_string(s)) return s;
    throw error(error_category::internal, "unknown sequenced_message state '" + text + "'");
}

sequence_instance to_instance(const detail::instance_columns& c) {
    sequence_instance row{c.id,
                          c.name,
                          c.context_id,
                          c.state == "CLOSED" ? instance_state::closed : instance_state::open,
                          from_microseconds(c.created_at),
                          from_microseconds(c.retain_until),
                          {}};
    if (c.remove_after_null == soci::i_ok) row.remove_after = from_microseconds(c.remove_after);
    return row;
}

/// Runs `rows` on `st` after executing it, once per fetched row.
template <class Row>
void for_each_row(soci::statement& st, Row&& row) {
    for (bool more = st.execute(true); more; more = st.fetch()) row();
}

// Writes whose result nobody reads wait for the transaction's next read or its commit.
struct claim_deletion {
    claim_key key;
};
struct message_insertion {
    message_record row;
};
struct state_change {
    message_id id;
    message_state state;
    timestamp at;
};
struct instance_closing {
    instance_id id;
    timestamp at;
};
struct actions_clearing {
    instance_id instance;
    pending_actions read;
};
using deferred_write = std::variant<claim_deletion, message_insertion, state_change, instance_closing, actions_clearing>;

/// A key or value as hex, or SQL NULL for a null one (kept apart from an empty one).
void bind_bytes(std::string& hex, soci::indicator& null, const record_bytes& bytes) {
    hex = bytes ? detail::to_hex(*bytes) : std::string();
    null = bytes ? soci::i_ok : soci::i_null;
}

void bind_record(detail::message_columns& s, const envelope& record) {
    s.cluster = record.cluster;
    s.topic = record.topic;
    s.partition = record.partition;
    s.offset = record.offset;
    bind_bytes(s.key, s.key_null, record.key);
    bind_bytes(s.value, s.value_null, record.value);
    // A column for operators only (the replay uses the headers): NULL when the value is no text.
    const auto traceparent = record.find_header(traceparent_header);
    const bool storable = traceparent && text_problem("traceparent", *traceparent).empty();
    s.traceparent = storable ? std::string(*traceparent) : std::string();
    s.traceparent_null = storable ? soci::i_ok : soci::i_null;
    s.record_time = to_microseconds(record.time);
    s.headers = detail::encode_headers(record.headers);
}

template <class Insert>
void bind_row(Insert& s, const message_record& row) {
    s.instance = row.instance;
    s.type = row.type;
    s.idempotence_id = row.idempotence_id;
    s.state = std::string(to_string(row.state));
    s.created_at = to_microseconds(row.created_at);
    s.state_changed_at = to_microseconds(row.state_changed_at);
}

void execute(detail::connection& c, const message_insertion& w) {
    if (!w.row.payload) {
        auto& s = c.statement<detail::message_insert>();
        bind_row(s, w.row);
        s.st.execute(true);
        return;
    }
    auto& s = c.statement<detail::message_insert_with_record>();
    bind_row(s, w.row);
    bind_record(s, *w.row.payload);
    s.st.execute(true);
}

void require_storable(const message_record& row) {
    require_key("message type", row.type);
    require_key("idempotence id", row.idempotence_id);
    if (row.payload) {
        require_text("topic", row.payload->topic);
        require_text("cluster", row.payload->cluster);
        for (const auto& h : row.payload->headers) require_text("header name", h.name);
    }
}

stored_as parse_stored_as(const std::string& text) {
    if (text == "INSERTED") return stored_as::inserted;
    if (text == "UPDATED") return stored_as::updated;
    if (text == "LEFT_EXISTING") return stored_as::left_existing;
    throw error(error_category::internal, "seqinbox_store_message answered '" + text + "'");
}

/// Whether a commit waits for its WAL flush (synchronous_commit) or leaves that to a later one.
enum class commit_flush { wait, skip };

/// For the commits the claim transaction's commit flushes after them (store_options::flush_every_commit).
commit_flush commit_flush_before_claim(const store_options& options) {
    return options.flush_every_commit ? commit_flush::wait : commit_flush::skip;
}

stored_as store_row(detail::connection& c, const message_record& row, commit_flush flush = commit_flush::wait) {
    auto& s = c.statement<detail::message_store>();
    bind_row(s, row);
    s.skip_flush = flush == commit_flush::skip ? 1 : 0;
    s.with_record = row.payload ? 1 : 0;
    bind_record(s, row.payload.value_or(envelope{}));
    s.st.execute(true);
    return parse_stored_as(s.outcome);
}

std::string microseconds_text(timestamp t) { return std::to_string(to_microseconds(t)); }

// The writes that travel in a batch (every one but the insertion of a row with its record).
void queue_write(detail::pipeline& batch, const claim_deletion& w) {
    batch.statement(detail::claim_delete_sql(), {w.key.type, w.key.idempotence_id});
}

void queue_write(detail::pipeline& batch, const state_change& w) {
    batch.statement(detail::message_state_update_sql(), {std::string(to_string(w.state)), microseconds_text(w.at), std::to_string(w.id)});
}

void queue_write(detail::pipeline& batch, const instance_closing& w) {
    batch.statement(detail::instance_close_sql(), {microseconds_text(w.at), std::to_string(w.id)});
}

void queue_write(detail::pipeline& batch, const actions_clearing& w) {
    if (const auto& request = w.read.on_instance)
        batch.statement(detail::instance_actions_clear_sql(),
                        {std::to_string(w.instance), std::string(to_string(request->action)), microseconds_text(request->requested_at)});
    if (w.read.on_messages.empty()) return;
    std::string ids, actions, times;
    for (const auto& request : w.read.on_messages) {
        const char* separator = ids.empty() ? "{" : ",";
        ids += separator + std::to_string(request.message);
        actions += separator + std::string(to_string(request.action));
        times += separator + microseconds_text(request.requested_at);
    }
    batch.statement(detail::message_actions_clear_sql(), {ids + "}", actions + "}", times + "}"});
}

bool batchable(const deferred_write& w) { return !std::holds_alternative<message_insertion>(w); }

void queue_write(detail::pipeline& batch, const deferred_write& w) {
    std::visit(
        [&](const auto& write) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(write)>, message_insertion>) queue_write(batch, write);
        },
        w);
}

/// Sends one deferred write on its own.
void execute(detail::connection& c, const deferred_write& w) {
    if (const auto* insertion = std::get_if<message_insertion>(&w)) return execute(c, *insertion);
    auto batch = c.batch();
    queue_write(batch, w);
    batch.run();
}

const char* describe(const deferred_write& w) {
    return std::visit(
        [](const auto& write) {
            using W = std::decay_t<decltype(write)>;
            if constexpr (std::is_same_v<W, claim_deletion>) return "deleting a claim";
            else if constexpr (std::is_same_v<W, message_insertion>) return "inserting a sequenced message";
            else if constexpr (std::is_same_v<W, state_change>) return "updating a sequenced message state";
            else if constexpr (std::is_same_v<W, actions_clearing>) return "clearing executed operator actions";
            else return "closing a sequence instance";
        },
        w);
}

}  // namespace

// ---- transaction ----

class store::transaction::impl {
public:
    impl(std::shared_ptr<detail::pool> pool, detail::lease conn) : pool_(std::move(pool)), conn_(std::move(conn)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    ~impl() { end_quietly(); }

    bool active() const noexcept { return !ended_ && operator->()->connected(); }

    /// Drops `instance` from the store's instance cache and says it is gone: a retryable error.
    [[noreturn]] void instance_removed(instance_id instance, std::string sqlstate = {}) {
        pool_->instances().forget(instance);
        throw error(error_category::retryable,
                    "sequence instance " + std::to_string(instance) + " no longer exists (removed meanwhile); retry the delivery",
                    std::move(sqlstate));
    }

    /// Runs `op` on the connection as one round trip; a SOCI failure becomes seqinbox::error and
    /// ends the transaction when the connection is lost, aborts it otherwise.
    template <class Op>
    decltype(auto) guarded(std::string_view doing, Op&& op) {
        require_active();
        try {
            conn_->count_round_trip();
            return op(*operator->());
        } catch (const soci::soci_error& e) {
            try {
                detail::fail(*operator->(), e, doing, conninfo());
            } catch (const error& failure) {
                if (failure.category() == error_category::connection) finish();
                else aborted_ = true;
                throw;
            }
        }
    }

    /// Like guarded, inside the transaction with every deferred write sent first.
    template <class Op>
    decltype(auto) read(std::string_view doing, Op&& op) {
        begin_if_needed();
        flush();
        return guarded(doing, std::forward<Op>(op));
    }

    /// Sends the statements `queue(batch)` adds in one round trip, inside the transaction: after
    /// BEGIN when it has not begun, and after the deferred writes. Returns their results.
    template <class Queue>
    std::vector<detail::result> batch(std::string_view doing, Queue&& queue) {
        if (!std::ranges::all_of(pending_, batchable)) {
            begin_if_needed();
            flush();
        }
        return guarded(doing, [&](detail::connection& c) {
            auto statements = c.batch();
            if (!begun_) statements.statement(detail::begin_sql(), {});
            begun_ = true;  // also when the batch fails: rollback() then ends the transaction
            for (const auto& w : std::exchange(pending_, {})) queue_write(statements, w);
            queue(statements);
            return statements.run();
        });
    }

    void defer(deferred_write write) {
        require_active();
        pending_.push_back(std::move(write));
    }

    void commit() {
        require_active();
        if (!begun_ && pending_.size() <= 1) {  // one write is atomic on its own: no BEGIN/COMMIT
            if (!pending_.empty()) send(pending_.front());
            finish();
            return;
        }
        if (aborted_ || (begun_ && in_failed_transaction())) {
            end_quietly();
            throw error(error_category::misuse,
                        "commit after a failed statement: PostgreSQL rolled the transaction back and nothing was saved");
        }
        try {
            batch("committing", [&](detail::pipeline& statements) { statements.statement(detail::commit_sql(), {}); });
        } catch (const error& e) {
            // Committed or not, the steps beside it must not wait for the WAL writer (other
            // failures leave the transaction to rollback(), which flushes).
            if (e.category() == error_category::connection) unless_connection_lost([&] { flush_steps_beside(); });
            throw;
        }
        if (!claim_won_) flush_steps_beside();  // else its commit wrote WAL after theirs and waited for the flush
        finish();
    }

    void rollback() {
        if (ended_) return;
        pending_.clear();
        // A lost connection: the server rolled back, or it is gone with whatever it did not flush.
        if (begun_) unless_connection_lost([&] { guarded("rolling back", [](detail::connection& c) { c.session().rollback(); }); });
        unless_connection_lost([&] { flush_steps_beside(); });
        finish();
    }

    store::savepoint_id savepoint() {
        const auto point = ++savepoints_;
        read("creating a savepoint", [&](detail::connection& c) { c.session() << "SAVEPOINT " + savepoint_name(point); });
        return point;
    }

    void rollback_to(store::savepoint_id point) {
        pending_.clear();  // deferred writes all came after the latest flush, so after `point`
        guarded("rolling back to a savepoint",
                [&](detail::connection& c) { c.session() << "ROLLBACK TO SAVEPOINT " + savepoint_name(point); });
        aborted_ = false;
    }

    soci::session& session() {
        begin_if_needed();
        flush();
        return operator->()->session();
    }

    detail::connection* operator->() const { return conn_.operator->(); }

    void claim_won() noexcept { claim_won_ = true; }
    /// A state step beside this transaction committed without waiting for its WAL flush.
    void step_beside_unflushed() noexcept { steps_beside_unflushed_ = true; }

private:
    static std::string savepoint_name(store::savepoint_id point) { return "seqinbox_" + std::to_string(point); }

    void require_active() const {
        if (ended_) throw error(error_category::misuse, "use of a PostgreSQL store transaction that has ended");
    }

    const std::string& conninfo() const { return pool_->options().conninfo; }

    void begin_if_needed() {
        if (begun_) return;
        guarded("starting a transaction", [](detail::connection& c) { c.session().begin(); });
        begun_ = true;
    }

    template <class Op>
    static void unless_connection_lost(Op&& op) {
        try {
            op();
        } catch (const error& e) {
            if (e.category() != error_category::connection) throw;
        }
    }

    /// Makes the state steps committed beside this transaction durable, when its own commit does
    /// not: on its connection, or on another when that one is lost.
    void flush_steps_beside() {
        if (!std::exchange(steps_beside_unflushed_, false)) return;
        const auto run = [](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::wal_flush_sql(), {});
            statements.run();
        };
        if (!ended_ && operator->()->connected()) return guarded("flushing the WAL of a state step", run);
        impl other(pool_, pool_->acquire());
        other.guarded("flushing the WAL of a state step", run);
    }

    void flush() {
        auto writes = std::exchange(pending_, {});
        for (const auto& w : writes) send(w);
    }

    void send(const deferred_write& w) {
        guarded(describe(w), [&](detail::connection& c) { execute(c, w); });
    }

    bool in_failed_transaction() const { return operator->()->in_failed_transaction(); }

    void finish() noexcept {
        ended_ = true;
        pending_.clear();
        conn_.release();
    }

    void end_quietly() noexcept {
        try {
            rollback();
        } catch (...) {
            if (conn_) operator->()->mark_broken();
            finish();
        }
    }

    std::shared_ptr<detail::pool> pool_;
    detail::lease conn_;
    bool begun_ = false;
    bool ended_ = false;
    bool aborted_ = false;
    bool claim_won_ = false;  ///< its commit writes WAL, so it waits for the flush (synchronous_commit)
    bool steps_beside_unflushed_ = false;
    store::savepoint_id savepoints_ = 0;
    std::vector<deferred_write> pending_;
};

store::transaction::transaction(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
store::transaction::transaction(transaction&&) noexcept = default;
store::transaction& store::transaction::operator=(transaction&&) noexcept = default;
store::transaction::~transaction() = default;

namespace {

template <class Impl>
Impl& checked(const std::unique_ptr<Impl>& state) {
    if (!state) throw error(error_category::misuse, "use of a moved-from PostgreSQL store transaction");
    return *state;
}

std::size_t queue_find(detail::pipeline& batch, const claim_key& key) {
    return batch.statement(detail::message_find_sql(), {key.type, key.idempotence_id});
}

std::vector<message_record> found_rows(const detail::result& r, const claim_key& key) {
    std::vector<message_record> rows;
    for (int i = 0; i < r.rows(); ++i)
        rows.push_back({r.number(i, 0), r.number(i, 1), key.type, key.idempotence_id, parse_message_state(r.text(i, 2)),
                        from_microseconds(r.number(i, 3)), from_microseconds(r.number(i, 4)), std::nullopt});
    return rows;
}

sequence_instance instance_row(const detail::result& r) {
    detail::instance_columns c{r.number(0, 0), r.text(0, 1), r.text(0, 2), r.text(0, 3), r.number(0, 4), r.number(0, 5), 0,
                               r.null(0, 6) ? soci::i_null : soci::i_ok};
    if (c.remove_after_null == soci::i_ok) c.remove_after = r.number(0, 6);
    return to_instance(c);
}

types_by_state types_of(const detail::result& r) {
    types_by_state types;
    for (int i = 0; i < r.rows(); ++i) (r.text(i, 1) == "PROCESSED" ? types.processed : types.waiting).push_back(r.text(i, 0));
    return types;
}

}  // namespace

// BEGIN, the claim and, when it is won, the lock of the instance, the key's rows and the
// instance's message types travel together in one round trip, each its own statement, so that
// the reads see what the lock's previous holder stored. A lost claim costs the server two cheap
// reads.
claim_result store::transaction::claim(const claim_request& request) {
    const claim_key& key = request.key;
    require_claim_key(key);
    auto& state = checked(impl_);
    const std::string id = std::to_string(request.instance);
    std::size_t claim = 0, rows = 0, lock = 0, types = 0;
    std::vector<detail::result> answers;
    try {
        answers = state.batch("claiming a message", [&](detail::pipeline& batch) {
            claim = batch.statement(detail::claim_insert_sql(), {key.type, key.idempotence_id, id, microseconds_text(request.now)});
            lock = batch.statement(detail::instance_lock_if_claimed_sql(), {id, key.type, key.idempotence_id});
            rows = queue_find(batch, key);
            types = batch.statement(detail::message_types_sql(), {id});
        });
    } catch (const error& e) {
        if (e.sqlstate() != instance_removed_sqlstate) throw;
        state.instance_removed(request.instance, e.sqlstate());
    }
    if (answers[claim].affected() != 1) return {};
    state.claim_won();
    if (answers[lock].rows() != 1) state.instance_removed(request.instance);  // the claim's key-share lock forbids it
    return {true, {instance_row(answers[lock]), types_of(answers[types])}, found_rows(answers[rows], key)};
}

void store::transaction::delete_claim(const claim_key& key) {
    require_claim_key(key);
    checked(impl_).defer(claim_deletion{key});
}

std::vector<message_record> store::transaction::find_messages(const claim_key& key) {
    require_claim_key(key);
    auto& state = checked(impl_);
    std::size_t rows = 0;
    const auto answers = state.batch("reading sequenced messages", [&](detail::pipeline& batch) { rows = queue_find(batch, key); });
    return found_rows(answers[rows], key);
}

// The instance's types travel with the lock, a statement of their own: read once it was granted.
instance_lock store::transaction::lock_instance(instance_id instance) {
    auto& state = checked(impl_);
    const std::string id = std::to_string(instance);
    std::size_t lock = 0, types = 0;
    const auto answers = state.batch("locking a sequence instance", [&](detail::pipeline& batch) {
        lock = batch.statement(detail::instance_lock_sql(), {id});
        types = batch.statement(detail::message_types_sql(), {id});
    });
    if (answers[lock].rows() == 0) state.instance_removed(instance);
    return {instance_row(answers[lock]), types_of(answers[types])};
}

types_by_state store::transaction::message_types(instance_id instance) {
    std::size_t types = 0;
    const auto answers = checked(impl_).batch("reading message types", [&](detail::pipeline& batch) {
        types = batch.statement(detail::message_types_sql(), {std::to_string(instance)});
    });
    return types_of(answers[types]);
}

namespace {

message_record waiting_row(const detail::waiting_query& s, instance_id instance) {
    envelope record;
    if (s.key_null == soci::i_ok) record.key = detail::from_hex(s.key);
    if (s.value_null == soci::i_ok) record.value = detail::from_hex(s.value);
    record.headers = detail::decode_headers(s.headers);
    if (s.topic_null == soci::i_ok) record.topic = s.topic;
    if (s.partition_null == soci::i_ok) record.partition = s.partition;
    if (s.offset_null == soci::i_ok) record.offset = s.offset;
    if (s.record_time_null == soci::i_ok) record.time = from_microseconds(s.record_time);
    if (s.cluster_null == soci::i_ok) record.cluster = s.cluster;
    return {s.id,         instance, s.type, s.idempotence_id, message_state::waiting, from_microseconds(s.created_at),
            from_microseconds(s.state_changed_at), std::move(record)};
}

}  // namespace

std::vector<message_record> store::transaction::waiting_messages(instance_id instance, std::span<const std::string> types) {
    return checked(impl_).read("reading waiting messages", [&](detail::connection& c) {
        auto& s = c.statement<detail::waiting_query>();
        s.instance = instance;
        s.types = detail::encode_list(types);
        std::vector<message_record> rows;
        for_each_row(s.st, [&] { rows.push_back(waiting_row(s, instance)); });
        return rows;
    });
}

void store::transaction::insert_message(message_record row) {
    require_storable(row);
    checked(impl_).defer(message_insertion{std::move(row)});
}

stored_as store::transaction::store_message(message_record row) {
    require_storable(row);
    return checked(impl_).read("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row); });
}

void store::transaction::update_message_state(message_id id, message_state state, timestamp now) {
    checked(impl_).defer(state_change{id, state, now});
}

void store::transaction::close_instance(instance_id instance, timestamp now) {
    checked(impl_).defer(instance_closing{instance, now});
}

pending_actions store::transaction::pending_actions(instance_id instance) {
    return checked(impl_).read("reading pending operator actions", [&](detail::connection& c) {
        // Message ids start at 1: row 0 is the instance's own action.
        long long id = 0;
        std::string action;
        long long at = 0;
        const std::string requested_at = detail::sql_microseconds("pending_action_requested_at");
        soci::statement st = (c.session().prepare << "SELECT 0, pending_action, " + requested_at +
                                                         " FROM sequence_instance WHERE id = :instance AND pending_action IS NOT NULL"
                                                         " UNION ALL SELECT id, pending_action, " +
                                                         requested_at +
                                                         " FROM sequenced_message WHERE sequence_instance_id = :instance_again"
                                                         " AND pending_action IS NOT NULL ORDER BY 1",
                              soci::into(id), soci::into(action), soci::into(at), soci::use(instance), soci::use(instance));
        seqinbox::pending_actions actions;
        for_each_row(st, [&] {
            if (id == 0)
                actions.on_instance = {action == "CLOSE" ? instance_action::close : instance_action::consume_all, from_microseconds(at)};
            else
                actions.on_messages.push_back(
                    {id, action == "EXPIRE" ? message_action::expire : message_action::consume, from_microseconds(at)});
        });
        return actions;
    });
}

void store::transaction::clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
    checked(impl_).defer(actions_clearing{instance, read});
}

store::savepoint_id store::transaction::savepoint() { return checked(impl_).savepoint(); }
void store::transaction::rollback_to(savepoint_id point) { checked(impl_).rollback_to(point); }
void store::transaction::commit() { checked(impl_).commit(); }
void store::transaction::rollback() { checked(impl_).rollback(); }
soci::session& store::transaction::session() { return checked(impl_).session(); }
bool store::transaction::active() const noexcept { return impl_ && impl_->active(); }

std::uint64_t store::transaction::id() {
    return static_cast<std::uint64_t>(checked(impl_).read("reading txid_current()", [](detail::connection& c) {
        auto& s = c.statement<detail::transaction_id_query>();
        s.st.execute(true);
        return s.id;
    }));
}

// ---- store ----

namespace {

long long query_number(soci::session& session, const std::string& sql) {
    long long n = 0;
    session << sql, soci::into(n);
    return n;
}

std::string migrate_hint(const std::string& conninfo) {
    return "run `seqinbox migrate --postgres '" + redact_conninfo(conninfo) +
           "'` (or seqinbox::postgresql::migrate()) before starting the inbox";
}

/// The database must hold exactly the schema this library was built with.
void check_schema(soci::session& session, const std::string& conninfo) {
    const int latest = latest_schema_version();
    if (query_number(session, "SELECT CAST(to_regclass('seqinbox_schema_history') IS NOT NULL AS integer)") == 0)
        throw error(error_category::schema_mismatch, "the database of '" + redact_conninfo(conninfo) +
                                                         "' has no seqinbox schema (table seqinbox_schema_history is missing): " +
                                                         migrate_hint(conninfo));
    const long long version = query_number(session, "SELECT COALESCE(max(version), 0) FROM seqinbox_schema_history");
    if (version > latest)
        throw error(error_category::schema_mismatch,
                    "the seqinbox schema of '" + redact_conninfo(conninfo) + "' is at version " + std::to_string(version) +
                        ", newer than this library's " + std::to_string(latest) + ": upgrade seqinbox");
    const bool claim_table = query_number(session, "SELECT CAST(to_regclass('sequential_inbox_idempotence') IS NOT NULL AS integer)") == 1;
    if (version < latest || !claim_table)
        throw error(error_category::schema_mismatch,
                    "the seqinbox schema of '" + redact_conninfo(conninfo) + "' is at version " + std::to_string(version) +
                        (claim_table ? "" : " without the claim table sequential_inbox_idempotence") + "; this library needs version " +
                        std::to_string(latest) + ": " + migrate_hint(conninfo));
}

}  // namespace

store::store(store_options options) : pool_(std::make_shared<detail::pool>(std::move(options))) {
    auto conn = pool_->acquire();
    try {
        check_schema(conn->session(), pool_->options().conninfo);
    } catch (const soci::soci_error& e) {
        detail::fail(*conn.operator->(), e, "checking the seqinbox schema", pool_->options().conninfo);
    }
}

store::~store() = default;

store::transaction store::begin() {
    auto conn = pool_->acquire();
    return transaction(std::make_unique<transaction::impl>(pool_, std::move(conn)));
}

sequence_instance store::create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                                timestamp created_at, timestamp retain_until) {
    require_key("sequence name", sequence);
    require_key("context id", context_id);
    auto& cache = pool_->instances();
    if (auto known = cache.find(sequence, context_id)) return std::move(*known);
    transaction::impl autocommit(pool_, pool_->acquire());
    // A row committed by a concurrent insert after this statement's snapshot is invisible to it:
    // the next attempt sees it.
    for (int attempt = 0; attempt < 3; ++attempt) {
        auto found = autocommit.guarded("creating sequence instance", [&](detail::connection& c) -> std::optional<sequence_instance> {
            auto& s = c.statement<detail::instance_upsert>();
            s.name = sequence;
            s.context_id = context_id;
            s.created_at = to_microseconds(created_at);
            s.retain_until = to_microseconds(retain_until);
            s.skip_flush = commit_flush_before_claim(options()) == commit_flush::skip ? 1 : 0;
            if (!s.st.execute(true)) return std::nullopt;
            if (s.created == 1 && s.skip_flush == 1) pool_->counts().count_unflushed_commit();
            return to_instance(s.row);
        });
        if (found) {
            cache.remember(*found);
            return std::move(*found);
        }
    }
    throw error(error_category::retryable, "sequence instance (" + sequence + ", " + context_id + ") could not be created or read; retry");
}

void store::forget_instance(instance_id id) { pool_->instances().forget(id); }

template <class Op>
auto store::autocommitted(std::string_view doing, Op&& op) {
    transaction::impl autocommit(pool_, pool_->acquire());
    return autocommit.guarded(doing, std::forward<Op>(op));
}

stored_as store::store_message(message_record row) {
    require_storable(row);
    return autocommitted("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row); });
}

stored_as store::store_message_beside(transaction& claim, message_record row) {
    require_storable(row);
    auto& t1 = checked(claim.impl_);
    const commit_flush flush = commit_flush_before_claim(options());
    if (flush == commit_flush::skip) t1.step_beside_unflushed();  // also when the outcome is unknown: it may have committed
    const stored_as what = autocommitted("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row, flush); });
    if (flush == commit_flush::skip) pool_->counts().count_unflushed_commit();
    return what;
}

bool store::update_one(std::string_view doing, const std::string& sql, const std::string& action, timestamp now, std::int64_t id) {
    return autocommitted(doing, [&](detail::connection& c) {
        const long long at = to_microseconds(now);
        const long long row = id;
        soci::statement st = (c.session().prepare << sql, soci::use(action), soci::use(at), soci::use(row));
        st.execute(true);
        return st.get_affected_rows() == 1;
    });
}

bool store::request_message_action(message_id id, message_action action, timestamp now) {
    return update_one("requesting an operator action",
                      "UPDATE sequenced_message SET pending_action = :action, pending_action_requested_at = " +
                          detail::sql_timestamp(":at") + " WHERE id = :id AND state = 'WAITING'",
                      std::string(to_string(action)), now, id);
}

bool store::request_instance_action(instance_id id, instance_action action, timestamp now) {
    return update_one("requesting an operator action",
                      "UPDATE sequence_instance SET pending_action = :action, pending_action_requested_at = " +
                          detail::sql_timestamp(":at") + " WHERE id = :id AND state = 'OPEN'",
                      std::string(to_string(action)), now, id);
}

std::vector<instance_id> store::instances_with_pending_actions(std::size_t limit) {
    return autocommitted("finding pending operator actions", [&](detail::connection& c) {
        long long id = 0;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = (c.session().prepare << "SELECT id FROM (SELECT id, pending_action_requested_at AS at"
                                                     " FROM sequence_instance WHERE pending_action IS NOT NULL UNION ALL"
                                                     " SELECT sequence_instance_id, pending_action_requested_at"
                                                     " FROM sequenced_message WHERE pending_action IS NOT NULL) p"
                                                     " GROUP BY id ORDER BY min(at), id LIMIT :limit",
                              soci::into(id), soci::use(max_rows));
        std::vector<instance_id> ids;
        for_each_row(st, [&] { ids.push_back(id); });
        return ids;
    });
}

// ---- housekeeping ----

struct store::job_lock::impl {
    impl(detail::lease leased, std::string lock_key) : conn(std::move(leased)), key(std::move(lock_key)) {}
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    detail::lease conn;
    std::string key;  // hashed by the server into the one-key advisory lock space
    ~impl() {
        if (!conn) return;
        try {
            conn->session() << "SELECT pg_advisory_unlock(hashtextextended(:key, 0))", soci::use(key);
        } catch (...) {
            conn->mark_broken();  // closing the session releases the lock
        }
    }
};

store::job_lock::job_lock() noexcept = default;
store::job_lock::job_lock(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
store::job_lock::job_lock(job_lock&&) noexcept = default;
store::job_lock& store::job_lock::operator=(job_lock&&) noexcept = default;
store::job_lock::~job_lock() = default;

store::job_lock store::try_lock_job(const std::string& job) {
    auto state = std::make_unique<job_lock::impl>(pool_->acquire(), "seqinbox.job:" + job);
    int got = 0;
    try {
        state->conn->count_round_trip();
        state->conn->session() << "SELECT CAST(pg_try_advisory_lock(hashtextextended(:key, 0)) AS integer)", soci::use(state->key),
            soci::into(got);
    } catch (const soci::soci_error& e) {
        state->conn->mark_broken();
        detail::fail(*state->conn.operator->(), e, "taking the lock of housekeeping job " + job, pool_->options().conninfo);
    }
    if (got != 1) {
        state->conn.release();  // held by another: nothing to unlock
        return {};
    }
    return job_lock(std::move(state));
}

std::vector<instance_id> store::closed_instances(timestamp now, std::span<const deduplication_window> windows, std::size_t limit) {
    std::vector<std::string> names;
    std::string seconds;  // "3600,60": numbers need no encoding
    for (const auto& w : windows) {
        names.push_back(w.sequence);
        seconds += (seconds.empty() ? "" : ",") + std::to_string(w.window.count());
    }
    // The sequence's window from `windows`, else the instance's own retention. A CLOSED row
    // without closed_at (not written by seqinbox) counts from its creation.
    const std::string window =
        "COALESCE((SELECT CAST(w.seconds AS bigint) * INTERVAL '1 second' FROM unnest(string_to_array(:names, ','),"
        " string_to_array(:seconds, ',')) AS w(name, seconds) WHERE convert_from(decode(w.name, 'hex'), 'UTF8') = sequence_instance.name),"
        " retain_until - created_at)";
    return instance_ids("finding closed instances past their deduplication window",
                        "state = 'CLOSED' AND COALESCE(closed_at, created_at) + " + window + " <= " + detail::sql_timestamp(":now") +
                            " ORDER BY id",
                        limit, detail::encode_list(names), seconds, to_microseconds(now));
}

std::vector<instance_id> store::removable_instances(timestamp now, std::size_t limit) {
    return instance_ids("finding instances to remove",
                        "state = 'OPEN' AND remove_after <= " + detail::sql_timestamp(":now") + " ORDER BY remove_after, id", limit,
                        to_microseconds(now));
}

template <class... Values>
std::vector<instance_id> store::instance_ids(std::string_view doing, const std::string& where, std::size_t limit, const Values&... values) {
    return autocommitted(doing, [&](detail::connection& c) {
        long long id = 0;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared(c.session(), "SELECT id FROM sequence_instance WHERE " + where + " LIMIT :limit",
                                              soci::into(id), soci::use(values)..., soci::use(max_rows));
        std::vector<instance_id> ids;
        for_each_row(st, [&] { ids.push_back(id); });
        return ids;
    });
}

std::vector<sequence_instance> store::mark_expired(timestamp now, std::chrono::seconds delay, std::size_t limit) {
    const long long at = to_microseconds(now), seconds = delay.count();
    return instances_where("marking expired instances",
                           "UPDATE sequence_instance SET remove_after = retain_until + :delay * INTERVAL '1 second'"
                           " WHERE id IN (SELECT id FROM sequence_instance WHERE state = 'OPEN' AND remove_after IS NULL"
                           " AND retain_until < " + detail::sql_timestamp(":now") +
                               " ORDER BY retain_until LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) RETURNING " +
                               detail::instance_columns_sql(),
                           limit, seconds, at);
}

std::vector<sequence_instance> store::expired_instances(timestamp now, std::size_t limit) {
    return instances_where("finding expired instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until < " +
                               detail::sql_timestamp(":now") + " ORDER BY retain_until, id LIMIT :limit",
                           limit, to_microseconds(now));
}

std::vector<sequence_instance> store::expiring_instances(timestamp now, double share, std::size_t limit) {
    const long long at = to_microseconds(now);
    return instances_where("finding expiring instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until >= " +
                               detail::sql_timestamp(":now") + " AND created_at + (retain_until - created_at) * :share <= " +
                               detail::sql_timestamp(":now_again") + " ORDER BY retain_until, id LIMIT :limit",
                           limit, at, share, at);
}

template <class... Values>
std::vector<sequence_instance> store::instances_where(std::string_view doing, const std::string& sql, std::size_t limit,
                                                      const Values&... values) {
    return autocommitted(doing, [&](detail::connection& c) {
        detail::instance_columns row;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared_with(c.session(), sql, detail::into_instance(row), soci::use(values)..., soci::use(max_rows));
        std::vector<sequence_instance> rows;
        for_each_row(st, [&] { rows.push_back(to_instance(row)); });
        return rows;
    });
}

namespace {

/// The instance row matching `where` (with `keys` bound in order), read in `state`'s transaction.
template <class Impl, class... Keys>
std::optional<sequence_instance> one_instance(Impl& state, std::string_view doing, const std::string& where, const Keys&... keys) {
    std::optional<sequence_instance> instance;
    state.read(doing, [&](detail::connection& c) {
        detail::instance_columns row;
        soci::statement st = detail::prepared_with(c.session(), "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE " + where,
                                                   detail::into_instance(row), soci::use(keys)...);
        if (st.execute(true)) instance = to_instance(row);
    });
    return instance;
}

}  // namespace

bool store::remove_instance(instance_id id, const forward_waiting& forward) {
    auto tx = begin();
    auto& state = checked(tx.impl_);
    const auto instance = one_instance(state, "locking an instance to remove it", "id = :id FOR UPDATE", id);
    if (!instance) return false;  // gone already; `tx` rolls back
    const auto waiting_types = tx.message_types(id).waiting;
    forward(*instance, tx.waiting_messages(id, waiting_types));
    state.read("removing an instance", [&](detail::connection& c) { c.session() << "DELETE FROM sequence_instance WHERE id = :id", soci::use(id); });
    tx.commit();
    pool_->instances().forget(id);
    return true;
}

// ---- read views ----

namespace {

instance_state parse_instance_state(const std::string& text) { return text == "CLOSED" ? instance_state::closed : instance_state::open; }

}  // namespace

std::vector<instance_count> store::instance_counts() {
    auto counts = grouped_counts("counting instances", "SELECT name, state, count(*) FROM sequence_instance GROUP BY name, state");
    std::vector<instance_count> out;
    for (auto& [name, state, n] : counts) out.push_back({std::move(name), parse_instance_state(state), n});
    std::ranges::sort(out, {}, [](const instance_count& c) { return std::tie(c.sequence, c.state); });
    return out;
}

std::vector<message_count> store::message_counts() {
    auto counts = grouped_counts("counting messages", "SELECT message_type, state, count(*) FROM sequenced_message GROUP BY message_type, state");
    std::vector<message_count> out;
    for (auto& [type, state, n] : counts) out.push_back({std::move(type), parse_message_state(state), n});
    std::ranges::sort(out, {}, [](const message_count& c) { return std::tie(c.type, c.state); });
    return out;
}

std::vector<std::tuple<std::string, std::string, std::size_t>> store::grouped_counts(std::string_view doing, const std::string& sql) {
    return autocommitted(doing, [&](detail::connection& c) {
        std::string name, state;
        long long n = 0;
        soci::statement st = detail::prepared(c.session(), sql, soci::into(name), soci::into(state), soci::into(n));
        std::vector<std::tuple<std::string, std::string, std::size_t>> rows;
        for_each_row(st, [&] { rows.emplace_back(name, state, static_cast<std::size_t>(n)); });
        return rows;
    });
}

std::vector<retention_count> store::retention_counts(timestamp now, double share) {
    return autocommitted("counting expiring and expired instances", [&](detail::connection& c) {
        std::string name;
        long long expiring = 0, expired = 0;
        const long long at = to_microseconds(now);
        soci::statement st = detail::prepared(
            c.session(),
            "SELECT name, count(*) FILTER (WHERE retain_until >= " + detail::sql_timestamp(":now") +
                " AND created_at + (retain_until - created_at) * :share <= " + detail::sql_timestamp(":now_again") +
                "), count(*) FILTER (WHERE retain_until < " + detail::sql_timestamp(":now_expired") +
                ") FROM sequence_instance WHERE state = 'OPEN' GROUP BY name ORDER BY name",
            soci::into(name), soci::into(expiring), soci::into(expired), soci::use(at), soci::use(share), soci::use(at), soci::use(at));
        std::vector<retention_count> rows;
        for_each_row(st, [&] { rows.push_back({name, static_cast<std::size_t>(expiring), static_cast<std::size_t>(expired)}); });
        return rows;
    });
}

std::optional<instance_view> store::view_instance(const std::string& sequence, const std::string& context_id) {
    auto tx = begin();
    auto& state = checked(tx.impl_);
    const auto instance = one_instance(state, "reading an instance", "name = :name AND context_id = :context_id", sequence, context_id);
    if (!instance) return std::nullopt;
    std::optional<instance_view> view = instance_view{*instance, {}, {}};
    const instance_id id = view->instance.id;
    state.read("reading the messages of an instance", [&](detail::connection& c) {
        message_record row;
        long long message = 0, created = 0, changed = 0;
        std::string message_state_text;
        soci::statement st = detail::prepared(
            c.session(), "SELECT id, message_type, idempotence_id, state, " + detail::sql_microseconds("created_at") + ", " +
                             detail::sql_microseconds("state_changed_at") + " FROM sequenced_message WHERE sequence_instance_id = :id ORDER BY id",
            soci::into(message), soci::into(row.type), soci::into(row.idempotence_id), soci::into(message_state_text), soci::into(created),
            soci::into(changed), soci::use(id));
        for_each_row(st, [&] {
            row.id = message;
            row.instance = id;
            row.state = parse_message_state(message_state_text);
            row.created_at = from_microseconds(created);
            row.state_changed_at = from_microseconds(changed);
            view->messages.push_back(row);
        });
    });
    view->actions = tx.pending_actions(id);
    tx.commit();
    return view;
}

store_statistics store::statistics() const {
    auto& c = pool_->counts();
    return {c.round_trips.load(), c.connections_opened.load(), c.connections_replaced.load(), c.unflushed_commits.load()};
}

const store_options& store::options() const noexcept { return pool_->options(); }

}  // namespace seqinbox::postgresql
