// Operator actions (seqinbox::action_store): requests are UPDATEs of a pending_action column, each
// in a transaction of its own with a short lock_timeout (store_options::request_lock_timeout), so
// that a request meeting a delivery's row lock gives up instead of holding its caller; the engine
// reads them under the instance lock and clears what it executed with its commit.
#include <string>
#include <vector>

#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql {

using detail::from_microseconds;
using detail::sql_timestamp;
using detail::to_microseconds;

namespace {

// One statement: it locks the target row, writes the request when the row's state allows it, and
// answers the state it found, so that a refusal names the reason the request met. Parameters: the
// row's id, the action, the time requested at (microseconds).
detail::named_sql request_sql(const char* name, std::string_view table, std::string_view allowed, std::string_view details) {
    return detail::named(name, "WITH target AS (SELECT id, state, " + std::string(details) + " AS details FROM " + std::string(table) +
                                   " WHERE id = $1 FOR NO KEY UPDATE), requested AS (UPDATE " + std::string(table) +
                                   " r SET pending_action = $2, pending_action_requested_at = " + sql_timestamp("CAST($3 AS bigint)") +
                                   " FROM target t WHERE r.id = t.id AND " + std::string(allowed) +
                                   " RETURNING r.id) SELECT t.state, t.details, (SELECT count(*) FROM requested) FROM target t");
}

// The request's own lock_timeout, in milliseconds; the transaction's only (SET LOCAL).
const detail::named_sql& request_lock_timeout_sql() {
    static const detail::named_sql s = detail::named("request_lock_timeout", "SELECT set_config('lock_timeout', $1, true)");
    return s;
}

constexpr std::string_view lock_not_available = "55P03";

/// Sends `batch` (a transaction from BEGIN to COMMIT); when a statement fails, rolls the
/// transaction back before rethrowing, so that the connection goes back to the pool idle.
std::vector<detail::result> run_or_roll_back(detail::connection& c, detail::pipeline& batch) {
    try {
        return batch.run();
    } catch (const soci::soci_error&) {
        try {
            if (c.in_failed_transaction()) c.session().rollback();
        } catch (const soci::soci_error&) {
            c.mark_broken();  // the pool drops it
        }
        throw;
    }
}

/// Whether a message row still holds the record it arrived with (a direct failure stores none).
constexpr std::string_view holds_record = "num_nonnulls(cluster, topic, partition, \"offset\", key, value, record_time, record_headers) > 0";

}  // namespace

// One round trip: BEGIN, the lock timeout, the request, COMMIT.
request_outcome store::requested(std::string_view target, const detail::named_sql& sql, std::string_view action, timestamp now, std::int64_t id,
                                 request_outcome (*refused)(std::string_view state, bool details)) {
    try {
        return autocommitted("requesting an operator action on " + std::string(target), [&](detail::connection& c) {
            auto batch = c.batch();
            batch.statement(detail::begin_sql(), {});
            batch.statement(request_lock_timeout_sql(), {std::to_string(options().request_lock_timeout.count())});
            const auto request = batch.statement(sql, {std::to_string(id), std::string(action), detail::microseconds_text(now)});
            batch.statement(detail::commit_sql(), {});
            const auto answer = run_or_roll_back(c, batch).at(request);
            if (answer.rows() == 0) return request_outcome::not_found;
            return answer.number(0, 2) == 1 ? request_outcome::accepted : refused(answer.text(0, 0), answer.number(0, 1) != 0);
        });
    } catch (const error& e) {
        if (e.sqlstate() == lock_not_available) throw request_locked(target);
        throw;
    }
}

request_outcome store::request_message_action(message_id id, message_action action, timestamp now) {
    static const detail::named_sql sql =
        request_sql("message_action_request", "sequenced_message", "(t.state = 'WAITING' OR (t.state = 'FAILED' AND t.details = 1))",
                    "CAST(" + std::string(holds_record) + " AS integer)");
    return requested("message " + std::to_string(id), sql, to_string(action), now, id, [](std::string_view state, bool has_record) {
        return state == "FAILED" && !has_record ? request_outcome::no_record : request_outcome::wrong_state;
    });
}

request_outcome store::request_instance_action(instance_id id, instance_action action, timestamp now) {
    static const detail::named_sql sql = request_sql("instance_action_request", "sequence_instance", "t.state = 'OPEN'", "0");
    return requested("instance " + std::to_string(id), sql, to_string(action), now, id,
                     [](std::string_view, bool) { return request_outcome::wrong_state; });
}

std::vector<instance_id> store::instances_with_pending_actions(std::size_t limit) {
    return autocommitted("finding pending operator actions", [&](detail::connection& c) {
        long long id = 0;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared(c.site(),
                                              "SELECT id FROM (SELECT id, pending_action_requested_at AS at"
                                              " FROM sequence_instance WHERE pending_action IS NOT NULL UNION ALL"
                                              " SELECT sequence_instance_id, pending_action_requested_at"
                                              " FROM sequenced_message WHERE pending_action IS NOT NULL) p"
                                              " GROUP BY id ORDER BY min(at), id LIMIT :limit",
                                              soci::into(id), soci::use(max_rows));
        std::vector<instance_id> ids;
        detail::for_each_row(st, [&] { ids.push_back(id); });
        return ids;
    });
}

pending_actions store::transaction::pending_actions(instance_id instance) {
    seqinbox::pending_actions actions;
    run_in(*this, "reading pending operator actions", [&](detail::connection& c) {
        // Message ids start at 1: row 0 is the instance's own action.
        long long id = 0;
        std::string action;
        long long at = 0;
        const std::string requested_at = detail::sql_microseconds("pending_action_requested_at");
        soci::statement st = detail::prepared(c.site(),
                                              "SELECT 0, pending_action, " + requested_at +
                                                  " FROM sequence_instance WHERE id = :instance AND pending_action IS NOT NULL"
                                                  " UNION ALL SELECT id, pending_action, " + requested_at +
                                                  " FROM sequenced_message WHERE sequence_instance_id = :instance_again"
                                                  " AND pending_action IS NOT NULL ORDER BY 1",
                                              soci::into(id), soci::into(action), soci::into(at), soci::use(instance), soci::use(instance));
        detail::for_each_row(st, [&] {
            if (id == 0)
                actions.on_instance = {detail::parse_instance_action(action), from_microseconds(at)};
            else
                actions.on_messages.push_back({id, detail::parse_message_action(action), from_microseconds(at)});
        });
    });
    return actions;
}

std::vector<message_record> store::transaction::action_targets(instance_id instance, std::span<const message_id> ids) {
    std::vector<std::string> id_texts;
    for (message_id id : ids) id_texts.push_back(std::to_string(id));
    std::size_t rows = 0;
    const auto answers = batch_in(*this, "reading the messages of operator actions", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::action_targets_sql(), {std::to_string(instance), detail::array_literal(id_texts)});
    });
    std::vector<message_record> found = detail::waiting_rows(answers[rows]);
    for (int i = 0; i < answers[rows].rows(); ++i)
        found[static_cast<std::size_t>(i)].state = detail::parse_message_state(answers[rows].text(i, detail::action_target_state_column));
    return found;
}

namespace detail {

namespace {

// Under READ COMMITTED an UPDATE rechecks its WHERE on a row changed since its snapshot: a
// request replaced after the read no longer matches and stays. Parameters: instance id, action,
// requested at.
const named_sql& instance_actions_clear_sql() {
    static const named_sql s = named("instance_actions_clear",
                                     "UPDATE sequence_instance SET pending_action = NULL, pending_action_requested_at = NULL WHERE id = $1"
                                     " AND pending_action = $2 AND pending_action_requested_at = " + sql_timestamp("$3"));
    return s;
}

// Likewise for messages. Parameters: message ids, actions, times requested at, as array literals
// "{1,2}", "{CONSUME,EXPIRE}", "{...}".
const named_sql& message_actions_clear_sql() {
    static const named_sql s = named("message_actions_clear",
                                     "UPDATE sequenced_message m SET pending_action = NULL, pending_action_requested_at = NULL"
                                     " FROM unnest(CAST($1 AS bigint[]), CAST($2 AS text[]), CAST($3 AS bigint[])) AS r(id, action, at)"
                                     " WHERE m.id = r.id AND m.pending_action = r.action AND m.pending_action_requested_at = " +
                                         sql_timestamp("r.at"));
    return s;
}

}  // namespace

void queue_actions_clearing(pipeline& batch, instance_id instance, const pending_actions& read) {
    if (const auto& request = read.on_instance)
        batch.statement(instance_actions_clear_sql(), {std::to_string(instance), std::string(to_string(request->action)),
                                                       microseconds_text(request->requested_at)});
    if (read.on_messages.empty()) return;
    std::string ids, actions, times;
    for (const auto& request : read.on_messages) {
        const char* separator = ids.empty() ? "{" : ",";
        ids += separator + std::to_string(request.message);
        actions += separator + std::string(to_string(request.action));
        times += separator + microseconds_text(request.requested_at);
    }
    batch.statement(message_actions_clear_sql(), {ids + "}", actions + "}", times + "}"});
}

}  // namespace detail

}  // namespace seqinbox::postgresql
