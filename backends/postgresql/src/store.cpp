// The PostgreSQL store's transaction and claim path, and the way to a connection for the store's
// other parts (store_parts.hpp: actions.cpp, housekeeping.cpp, views.cpp).
#include "seqinbox/postgresql/store.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
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
#include "store_parts.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::for_each_row;
using detail::from_microseconds;
using detail::microseconds_text;
using detail::parse_message_state;
using detail::parse_stored_as;
using detail::to_instance;
using detail::to_microseconds;

/// The engine rejects such values before they reach a store; this guards direct callers.
void throw_if_problem(std::string problem) {
    if (!problem.empty()) throw error(error_category::bad_message, std::move(problem));
}

void require_key(std::string_view what, std::string_view value) { throw_if_problem(key_problem(what, value)); }

void require_claim_key(const claim_key& key) { throw_if_problem(claim_key_problem(key.type, key.idempotence_id)); }

// Writes whose result nobody reads wait for the transaction's next read or its commit.
struct claim_deletion {
    claim_key key;
};
struct message_insertion {
    message_record row;
};
/// store_message of a row whose outcome is known beforehand (see transaction::store_message).
struct message_storing {
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
/// SAVEPOINT and RELEASE travel with the writes around them: a listener that sends nothing costs
/// no round trip for its savepoint (see transaction::impl::savepoint).
struct savepoint_taking {
    store::savepoint_id point;
    std::size_t depth;
};
struct savepoint_release {
    store::savepoint_id point;
    std::size_t depth;
};
using deferred_write = std::variant<claim_deletion, message_insertion, message_storing, state_change, instance_closing, actions_clearing,
                                    savepoint_taking, savepoint_release>;


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

void require_storable(const message_record& row) { throw_if_problem(storage_problem(row)); }

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

// The writes that travel in a batch (every one but the insertion of a row with its record).
void queue_write(detail::pipeline& batch, const claim_deletion& w) {
    batch.statement(detail::claim_delete_sql(), {w.key.type, w.key.idempotence_id});
}

detail::parameter or_null(const std::string& text, soci::indicator null) {
    return null == soci::i_ok ? detail::parameter(text) : std::nullopt;
}

// The parameters bind_row and bind_record give message_store, as text.
std::vector<detail::parameter> store_parameters(const message_record& row) {
    detail::message_columns c;
    bind_record(c, row.payload.value_or(envelope{}));
    return {std::to_string(row.instance), row.type, row.idempotence_id, std::string(to_string(row.state)),
            microseconds_text(row.created_at), microseconds_text(row.state_changed_at), row.payload ? "1" : "0", c.cluster,
            c.topic, std::to_string(c.partition), std::to_string(c.offset), or_null(c.key, c.key_null), or_null(c.value, c.value_null),
            or_null(c.traceparent, c.traceparent_null), std::to_string(c.record_time),
            c.headers};
}

/// Rows of parameters as one array parameter per column.
std::vector<detail::parameter> as_arrays(const std::vector<std::vector<detail::parameter>>& rows) {
    std::vector<detail::parameter> arrays;
    for (std::size_t column = 0; column < rows.front().size(); ++column) {
        std::vector<detail::parameter> items;
        for (const auto& row : rows) items.push_back(row[column]);
        arrays.push_back(detail::array_literal(items));
    }
    return arrays;
}

void queue_rows(detail::pipeline& batch, const detail::named_sql& sql, const std::vector<std::vector<detail::parameter>>& rows) {
    if (!rows.empty()) batch.statement(sql, as_arrays(rows));
}

void queue_write(detail::pipeline& batch, const actions_clearing& w) { detail::queue_actions_clearing(batch, w.instance, w.read); }

bool batchable(const deferred_write& w) { return !std::holds_alternative<message_insertion>(w); }

/// Queues deferred writes in their order, but the state changes in one statement (the last of
/// each row's, in id order), the message stores in another and the instance closings in a third,
/// after the rest (finish()): no other deferred write touches their rows or columns (a key's
/// store is deferred once and its row has no id to change yet; the others delete claims and clear
/// actions).
struct write_queue {
    detail::pipeline& batch;
    std::vector<std::vector<detail::parameter>> stores{}, closings{};
    std::map<message_id, std::vector<detail::parameter>> states{};

    void operator()(const state_change& w) {
        states.insert_or_assign(w.id, std::vector<detail::parameter>{std::string(to_string(w.state)), microseconds_text(w.at), std::to_string(w.id)});
    }
    void operator()(const message_storing& w) { stores.push_back(store_parameters(w.row)); }
    void operator()(const instance_closing& w) { closings.push_back({microseconds_text(w.at), std::to_string(w.id)}); }
    void operator()(const message_insertion&) {}  // not batchable: sent on its own
    // The grouped writes stay on their side of a savepoint's bounds.
    void operator()(const savepoint_taking& w) {
        finish();
        batch.statement(detail::savepoint_sql(detail::savepoint_command::take, w.depth), {});
    }
    void operator()(const savepoint_release& w) {
        finish();
        batch.statement(detail::savepoint_sql(detail::savepoint_command::release, w.depth), {});
    }
    void operator()(const auto& w) { queue_write(batch, w); }

    void finish() {
        std::vector<std::vector<detail::parameter>> changes;
        for (auto& [id, change] : states) changes.push_back(std::move(change));
        queue_rows(batch, detail::message_states_update_sql(), changes);
        queue_rows(batch, detail::messages_store_sql(), stores);
        queue_rows(batch, detail::instances_close_sql(), closings);
        states.clear();
        stores.clear();
        closings.clear();
    }
};

void queue_writes(detail::pipeline& batch, const std::vector<deferred_write>& writes) {
    write_queue queue{batch};
    for (const auto& w : writes) std::visit(queue, w);
    queue.finish();
}

/// Sends one deferred write on its own.
void execute(detail::connection& c, const deferred_write& w) {
    if (const auto* insertion = std::get_if<message_insertion>(&w)) return execute(c, *insertion);
    auto batch = c.batch();
    write_queue queue{batch};
    std::visit(queue, w);
    queue.finish();
    batch.run();
}

const char* describe(const deferred_write& w) {
    return std::visit(
        [](const auto& write) {
            using W = std::decay_t<decltype(write)>;
            if constexpr (std::is_same_v<W, claim_deletion>) return "deleting a claim";
            else if constexpr (std::is_same_v<W, message_insertion>) return "inserting a sequenced message";
            else if constexpr (std::is_same_v<W, message_storing>) return "storing a sequenced message";
            else if constexpr (std::is_same_v<W, state_change>) return "updating a sequenced message state";
            else if constexpr (std::is_same_v<W, actions_clearing>) return "clearing executed operator actions";
            else if constexpr (std::is_same_v<W, savepoint_taking>) return "creating a savepoint";
            else if constexpr (std::is_same_v<W, savepoint_release>) return "releasing a savepoint";
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

    /// The same for a batch's claims, of which one named a removed instance (which one PostgreSQL
    /// does not say): every instance of the batch is forgotten.
    [[noreturn]] void instances_removed(std::span<const claim_request> requests, std::string sqlstate = {}) {
        std::string ids;
        for (const auto& r : requests) {
            pool_->instances().forget(r.instance);
            ids += (ids.empty() ? "" : ", ") + std::to_string(r.instance);
        }
        throw error(error_category::retryable,
                    "a sequence instance of the batch (one of " + ids + ") no longer exists (removed meanwhile); retry the batch",
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
        const auto writes = std::exchange(pending_, {});
        return sending(writes, [&] {
            return guarded(doing, [&](detail::connection& c) {
                auto statements = c.batch();
                if (!begun_) statements.statement(detail::begin_sql(), {});
                begun_ = true;  // also when the batch fails: rollback() then ends the transaction
                queue_writes(statements, writes);
                queue(statements);
                return statements.run();
            });
        });
    }

    void defer(deferred_write write) {
        require_active();
        pending_.push_back(std::move(write));
    }

    void commit() {
        require_active();
        if (!begun_ && pending_.size() <= 1 && open_.empty()) {  // one write is atomic on its own: no BEGIN/COMMIT
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

    // A savepoint is deferred like a write: it reaches the server with the next round trip (the
    // listener's first statement, through session()), or never when a release follows at once.
    // Should that round trip fail, the savepoint does not exist: releasing or rolling back to it
    // rethrows that failure, so a store error is never taken for the listener's.
    store::savepoint_id savepoint() {
        require_active();
        const auto point = ++savepoints_;
        open_.push_back(point);
        pending_.push_back(savepoint_taking{point, open_.size()});
        return point;
    }

    void rollback_to(store::savepoint_id point) {
        const std::size_t depth = depth_of(point);
        unstored_.clear();  // claims after `point` are undone: from now on store_message asks the server
        open_.resize(depth);  // later savepoints end; this one stays, as in SQL
        if (const auto unsent = unsent_savepoint(point); unsent != pending_.end()) {
            pending_.erase(std::next(unsent), pending_.end());  // nothing after it reached the server
            return;
        }
        pending_.clear();  // deferred writes all came after the latest flush, so after `point`
        guarded("rolling back to a savepoint", [&](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::savepoint_sql(detail::savepoint_command::roll_back_to, depth), {});
            statements.run();
        });
        aborted_ = false;
    }

    void release(store::savepoint_id point) {
        const std::size_t depth = depth_of(point);
        open_.resize(depth - 1);
        if (const auto unsent = unsent_savepoint(point); unsent != pending_.end() && std::next(unsent) == pending_.end()) {
            pending_.pop_back();  // nothing was written in its scope
            return;
        }
        defer(savepoint_release{point, depth});
    }

    soci::session& session() {
        begin_if_needed();
        flush();
        return operator->()->session();
    }

    detail::connection* operator->() const { return conn_.operator->(); }

    /// This transaction won the claim of `key`, whose rows it read then: `none` when there were none.
    void claim_won(const claim_key& key, bool rows_found) {
        claim_won_ = true;
        if (!rows_found) unstored_.insert(key);
    }
    /// Whether store_message of `key` may be deferred, its outcome known: this transaction holds
    /// the key's claim and no row of it exists but what this transaction wrote, which is nothing.
    bool take_unstored(const claim_key& key) { return unstored_.erase(key) == 1; }
    void claim_deleted(const claim_key& key) { unstored_.erase(key); }
    /// A state step beside this transaction committed without waiting for its WAL flush.
    void step_beside_unflushed() noexcept { steps_beside_unflushed_ = true; }

private:
    /// The depth of open savepoint `point`; rethrows the failure of the round trip that was to
    /// create it.
    std::size_t depth_of(store::savepoint_id point) {
        if (const auto failed = never_created_.find(point); failed != never_created_.end()) std::rethrow_exception(failed->second);
        require_active();
        const auto at = std::ranges::find(open_, point);
        if (at == open_.end()) throw error(error_category::misuse, "savepoint " + std::to_string(point) + " is not open in this transaction");
        return static_cast<std::size_t>(at - open_.begin()) + 1;
    }

    std::vector<deferred_write>::iterator unsent_savepoint(store::savepoint_id point) {
        return std::ranges::find_if(pending_, [&](const deferred_write& w) {
            const auto* taking = std::get_if<savepoint_taking>(&w);
            return taking != nullptr && taking->point == point;
        });
    }

    /// Runs `send(writes)`; when it fails, the savepoints among `writes` were never created.
    template <class Send>
    decltype(auto) sending(const std::vector<deferred_write>& writes, Send&& send) {
        try {
            return send();
        } catch (...) {
            for (const auto& w : writes)
                if (const auto* taking = std::get_if<savepoint_taking>(&w)) never_created_.emplace(taking->point, std::current_exception());
            throw;
        }
    }

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

    /// The deferred writes in one round trip when they can travel together, else one by one.
    void flush() {
        if (pending_.empty()) return;
        if (std::ranges::all_of(pending_, batchable)) {
            batch("sending deferred writes", [](detail::pipeline&) {});
            return;
        }
        auto writes = std::exchange(pending_, {});
        sending(writes, [&] {
            for (const auto& w : writes) send(w);
        });
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
    std::vector<store::savepoint_id> open_;  ///< savepoints created or deferred, not released, outermost first
    std::map<store::savepoint_id, std::exception_ptr> never_created_;  ///< their round trip failed
    std::vector<deferred_write> pending_;
    std::set<claim_key> unstored_;  ///< won claims of keys without rows, none stored since
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

/// The row at `row` of a result whose columns from `first` on are those of message_find_sql.
message_record found_row(const detail::result& r, int row, int first, const claim_key& key) {
    return {r.number(row, first), r.number(row, first + 1), key.type, key.idempotence_id, parse_message_state(r.text(row, first + 2)),
            from_microseconds(r.number(row, first + 3)), from_microseconds(r.number(row, first + 4)), std::nullopt};
}

std::vector<message_record> found_rows(const detail::result& r, const claim_key& key) {
    std::vector<message_record> rows;
    for (int i = 0; i < r.rows(); ++i) rows.push_back(found_row(r, i, 0, key));
    return rows;
}

}  // namespace

sequence_instance detail::instance_row(const result& r, int row, int first) {
    const auto at = [&](int column) { return r.number(row, first + column); };
    detail::instance_columns c{at(0), r.text(row, first + 1), r.text(row, first + 2), r.text(row, first + 3), at(4), at(5), 0,
                               r.null(row, first + 6) ? soci::i_null : soci::i_ok};
    if (c.remove_after_null == soci::i_ok) c.remove_after = at(6);
    return to_instance(c);
}

namespace {

void add_type(types_by_state& types, std::string type, std::string_view state) {
    const bool processed = detail::parse_message_state(state) == message_state::processed;
    (processed ? types.processed : types.waiting).push_back(std::move(type));
}

types_by_state types_of(const detail::result& r) {
    types_by_state types;
    for (int i = 0; i < r.rows(); ++i) add_type(types, r.text(i, 0), r.text(i, 1));
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
    if (answers[lock].rows() != 1) state.instance_removed(request.instance);  // the claim's key-share lock forbids it
    claim_result won{true, {detail::instance_row(answers[lock]), types_of(answers[types])}, found_rows(answers[rows], key)};
    state.claim_won(key, !won.rows.empty());
    return won;
}

namespace {

/// The parameters of claim_batch_sql, in the order of the requests.
std::vector<detail::parameter> claim_batch_parameters(std::span<const claim_request> requests) {
    std::vector<std::string> types, ids, instances, times;
    for (const auto& r : requests) {
        types.push_back(r.key.type);
        ids.push_back(r.key.idempotence_id);
        instances.push_back(std::to_string(r.instance));
        times.push_back(microseconds_text(r.now));
    }
    return {detail::array_literal(types), detail::array_literal(ids), detail::array_literal(instances), detail::array_literal(times)};
}

/// The keys of a batch must be distinct (a second claim of a key in one statement would win too).
void require_distinct_keys(std::span<const claim_request> requests) {
    std::vector<const claim_key*> keys;
    for (const auto& r : requests) {
        require_claim_key(r.key);
        keys.push_back(&r.key);
    }
    std::ranges::sort(keys, {}, [](const claim_key* k) { return *k; });
    const auto twin = std::ranges::adjacent_find(keys, {}, [](const claim_key* k) { return *k; });
    if (twin != keys.end())
        throw error(error_category::misuse, "claim_batch: the key (" + (*twin)->type + ", " + (*twin)->idempotence_id +
                                                ") is requested twice; the keys of a batch must be distinct");
}

/// What a batch's three answers say, per won key.
struct batch_answers {
    std::map<claim_key, instance_id> won;
    std::map<instance_id, instance_lock> locks;
    std::map<claim_key, std::vector<message_record>> rows;
};

}  // namespace

// The claims and the instance locks in one statement, then the reads under the locks, each a
// statement of its own (so that they see what the locks' previous holders committed): one round
// trip with BEGIN and the deferred writes. Which claims are won is known only once they ran, so
// the reads cover every request: a lost claim costs the server two cheap index reads.
std::vector<claim_result> store::transaction::claim_batch(std::span<const claim_request> requests) {
    if (requests.empty()) return {};
    require_distinct_keys(requests);
    auto& state = checked(impl_);
    const auto params = claim_batch_parameters(requests);
    std::size_t claims = 0, rows = 0, types = 0;
    std::vector<detail::result> answers;
    try {
        answers = state.batch("claiming a batch of messages", [&](detail::pipeline& batch) {
            claims = batch.statement(detail::claim_batch_sql(), params);
            rows = batch.statement(detail::message_find_batch_sql(), {params[0], params[1]});
            types = batch.statement(detail::message_types_batch_sql(), {params[2]});
        });
    } catch (const error& e) {
        if (e.sqlstate() != instance_removed_sqlstate) throw;
        state.instances_removed(requests, e.sqlstate());
    }
    batch_answers found;
    const auto& won = answers[claims];
    for (int i = 0; i < won.rows(); ++i) {
        if (won.null(i, 2)) state.instances_removed(requests);  // the claim's key-share lock forbids it
        const auto instance = detail::instance_row(won, i, 2);
        found.won.emplace(claim_key{won.text(i, 0), won.text(i, 1)}, instance.id);
        found.locks.try_emplace(instance.id, instance_lock{instance, {}});
    }
    if (found.won.empty()) return std::vector<claim_result>(requests.size());
    const auto& type_rows = answers[types];
    for (int i = 0; i < type_rows.rows(); ++i)
        if (auto lock = found.locks.find(type_rows.number(i, 0)); lock != found.locks.end())
            add_type(lock->second.types, type_rows.text(i, 1), type_rows.text(i, 2));
    const auto& key_rows = answers[rows];
    for (int i = 0; i < key_rows.rows(); ++i) {
        claim_key key{key_rows.text(i, 0), key_rows.text(i, 1)};
        if (found.won.contains(key)) found.rows[key].push_back(found_row(key_rows, i, 2, key));
    }
    std::vector<claim_result> results;
    for (const auto& r : requests) {
        const auto won_on = found.won.find(r.key);
        if (won_on == found.won.end()) {
            results.emplace_back();
            continue;
        }
        results.push_back({true, found.locks.at(won_on->second), std::move(found.rows[r.key])});
        state.claim_won(r.key, !results.back().rows.empty());
    }
    return results;
}

void store::transaction::delete_claim(const claim_key& key) {
    require_claim_key(key);
    auto& state = checked(impl_);
    state.defer(claim_deletion{key});
    state.claim_deleted(key);
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
    return {detail::instance_row(answers[lock]), types_of(answers[types])};
}

types_by_state store::transaction::message_types(instance_id instance) {
    std::size_t types = 0;
    const auto answers = checked(impl_).batch("reading message types", [&](detail::pipeline& batch) {
        types = batch.statement(detail::message_types_sql(), {std::to_string(instance)});
    });
    return types_of(answers[types]);
}

namespace {

/// The instance id of a row of waiting_messages_batch_sql and waiting_messages_of_instances_sql.
constexpr int waiting_instance_column = 13;

/// A row of waiting_messages_sql, with its record.
message_record waiting_row(const detail::result& r, int row, instance_id instance) {
    const auto set = [&](int column, auto& field, auto convert) {
        if (!r.null(row, column)) field = convert(r.text(row, column));
    };
    const auto text = [](std::string t) { return t; };
    const auto number = [&](int column) { return r.number(row, column); };
    envelope record;
    set(5, record.cluster, text);
    set(6, record.topic, text);
    if (!r.null(row, 7)) record.partition = static_cast<std::int32_t>(number(7));
    if (!r.null(row, 8)) record.offset = number(8);
    set(9, record.key, [](const std::string& hex) { return detail::from_hex(hex); });
    set(10, record.value, [](const std::string& hex) { return detail::from_hex(hex); });
    if (!r.null(row, 11)) record.time = from_microseconds(number(11));
    record.headers = detail::decode_headers(r.text(row, 12));
    return {number(0), instance, r.text(row, 1), r.text(row, 2), message_state::waiting, from_microseconds(number(3)),
            from_microseconds(number(4)), std::move(record)};
}

}  // namespace

// With the deferred writes in one round trip: a release pass reads what the batch buffered.
std::vector<message_record> store::transaction::waiting_messages(instance_id instance, std::span<const std::string> types) {
    std::size_t rows = 0;
    const auto answers = checked(impl_).batch("reading waiting messages", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::waiting_messages_sql(), {std::to_string(instance), detail::array_literal(types)});
    });
    std::vector<message_record> found;
    for (int i = 0; i < answers[rows].rows(); ++i) found.push_back(waiting_row(answers[rows], i, instance));
    return found;
}

std::vector<std::vector<message_record>> store::transaction::waiting_messages(std::span<const waiting_query> queries) {
    std::vector<std::string> instances, types;
    for (const auto& q : queries)
        for (const auto& type : q.types) {
            instances.push_back(std::to_string(q.instance));
            types.push_back(type);
        }
    std::size_t rows = 0;
    const auto answers = checked(impl_).batch("reading waiting messages", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::waiting_messages_batch_sql(), {detail::array_literal(instances), detail::array_literal(types)});
    });
    std::vector<std::vector<message_record>> found(queries.size());
    for (const message_record& row : detail::waiting_rows(answers[rows])) {
        for (std::size_t k = 0; k < queries.size(); ++k)
            if (queries[k].instance == row.instance && std::ranges::find(queries[k].types, row.type) != queries[k].types.end())
                found[k].push_back(row);
    }
    return found;
}

std::vector<message_record> detail::waiting_rows(const result& r) {
    std::vector<message_record> found;
    for (int i = 0; i < r.rows(); ++i) found.push_back(waiting_row(r, i, r.number(i, waiting_instance_column)));
    return found;
}

void store::transaction::insert_message(message_record row) {
    require_storable(row);
    checked(impl_).defer(message_insertion{std::move(row)});
}

// A key this transaction claimed without rows has none until the store: its outcome is known,
// so the write waits for the next round trip (a batch of deliveries then costs a handful). Only
// a state step beside a dead claim transaction of the key could commit a row first (see
// store_message_beside): the function then leaves or updates that row as it would have, and
// only the outcome said here is wrong, nothing stored.
stored_as store::transaction::store_message(message_record row) {
    require_storable(row);
    auto& state = checked(impl_);
    if (state.take_unstored(row.key())) {
        state.defer(message_storing{std::move(row)});
        return stored_as::inserted;
    }
    return state.read("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row); });
}

void store::transaction::update_message_state(message_id id, message_state state, timestamp now) {
    checked(impl_).defer(state_change{id, state, now});
}

void store::transaction::close_instance(instance_id instance, timestamp now) {
    checked(impl_).defer(instance_closing{instance, now});
}

void store::transaction::clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
    checked(impl_).defer(actions_clearing{instance, read});
}

store::savepoint_id store::transaction::savepoint() { return checked(impl_).savepoint(); }
void store::transaction::rollback_to(savepoint_id point) { checked(impl_).rollback_to(point); }
void store::transaction::release(savepoint_id point) { checked(impl_).release(point); }
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
        read_lock_table(conn->session());
    } catch (const soci::soci_error& e) {
        detail::fail(*conn.operator->(), e, "checking the seqinbox schema", pool_->options().conninfo);
    }
}

void store::read_lock_table(soci::session& session) {
    const auto setting = [&](const char* name) { return query_number(session, std::string("SELECT current_setting('") + name + "')::bigint"); };
    const long long per_transaction = setting("max_locks_per_transaction");
    const long long connections = setting("max_connections");
    const long long prepared = setting("max_prepared_transactions");
    lock_table_entries_ = static_cast<std::size_t>(per_transaction * (connections + prepared));
    lock_table_ = std::to_string(lock_table_entries_) + " entries (max_locks_per_transaction " + std::to_string(per_transaction) +
                  " x (max_connections " + std::to_string(connections) + " + max_prepared_transactions " + std::to_string(prepared) + "))";
}

std::size_t store::max_batch_records(bool listeners_join) const noexcept {
    constexpr std::size_t for_relations = 64;
    const std::size_t share = lock_table_entries_ / (2 * options().pool_size);
    const std::size_t per_record = listeners_join ? 2 : 1;
    return share > for_relations + per_record ? (share - for_relations) / per_record : 1;
}

const std::string& store::lock_table() const noexcept { return lock_table_; }

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

namespace {

using instance_key = std::pair<std::string, std::string>;  // sequence, context id

/// The parameters of instance_upsert_batch_sql for `missing`.
std::vector<detail::parameter> instance_batch_parameters(const std::map<instance_key, const instance_creation*>& missing,
                                                         bool skip_flush) {
    std::vector<std::string> names, contexts, created, retained;
    for (const auto& [key, request] : missing) {
        names.push_back(key.first);
        contexts.push_back(key.second);
        created.push_back(microseconds_text(request->created_at));
        retained.push_back(microseconds_text(request->retain_until));
    }
    return {detail::array_literal(names), detail::array_literal(contexts), detail::array_literal(created), detail::array_literal(retained),
            skip_flush ? "1" : "0"};
}

}  // namespace

std::vector<sequence_instance> store::create_or_get_instances(std::span<const instance_creation> requests) {
    auto& cache = pool_->instances();
    std::map<instance_key, sequence_instance> found;
    std::map<instance_key, const instance_creation*> missing;
    for (const auto& r : requests) {
        require_key("sequence name", r.sequence);
        require_key("context id", r.context_id);
        instance_key key{r.sequence, r.context_id};
        if (found.contains(key) || missing.contains(key)) continue;
        if (auto known = cache.find(r.sequence, r.context_id)) found.emplace(std::move(key), std::move(*known));
        else missing.emplace(std::move(key), &r);
    }
    const bool skip_flush = commit_flush_before_claim(options()) == commit_flush::skip;
    std::optional<transaction::impl> autocommit;  // a connection only when the cache does not know them all
    if (!missing.empty()) autocommit.emplace(pool_, pool_->acquire());
    for (int attempt = 0; attempt < 3 && !missing.empty(); ++attempt) {
        const auto answer = autocommit->guarded("creating sequence instances", [&](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::instance_upsert_batch_sql(), instance_batch_parameters(missing, skip_flush));
            return statements.run().at(0);
        });
        for (int i = 0; i < answer.rows(); ++i) {
            auto instance = detail::instance_row(answer, i);
            if (answer.number(i, 7) == 1 && skip_flush) pool_->counts().count_unflushed_commit();
            cache.remember(instance);
            instance_key key{instance.sequence, instance.context_id};
            missing.erase(key);
            found.insert_or_assign(std::move(key), std::move(instance));
        }
    }
    if (!missing.empty())
        throw error(error_category::retryable, "sequence instance (" + missing.begin()->first.first + ", " +
                                                   missing.begin()->first.second + ") could not be created or read; retry");
    std::vector<sequence_instance> results;
    for (const auto& r : requests) results.push_back(found.at({r.sequence, r.context_id}));
    return results;
}

void store::forget_instance(instance_id id) { pool_->instances().forget(id); }

void store::run_autocommitted(std::string_view doing, const connection_work& work) {
    transaction::impl autocommit(pool_, pool_->acquire());
    autocommit.guarded(doing, work);
}

void store::run_in(transaction& tx, std::string_view doing, const connection_work& work) { checked(tx.impl_).read(doing, work); }

std::vector<detail::result> store::batch_in(transaction& tx, std::string_view doing, const batch_work& queue) {
    return checked(tx.impl_).batch(doing, queue);
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

store_statistics store::statistics() const {
    auto& c = pool_->counts();
    return {c.round_trips.load(), c.connections_opened.load(), c.connections_replaced.load(), c.unflushed_commits.load()};
}

const store_options& store::options() const noexcept { return pool_->options(); }

}  // namespace seqinbox::postgresql
