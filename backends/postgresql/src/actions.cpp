// Operator actions (seqinbox::action_store): requests are autocommitted UPDATEs of a
// pending_action column; the engine reads them under the instance lock and clears what it
// executed with its commit.
#include <string>
#include <vector>

#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql {

using detail::from_microseconds;
using detail::sql_timestamp;
using detail::to_microseconds;

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
                      "UPDATE sequenced_message SET pending_action = :action, pending_action_requested_at = " + sql_timestamp(":at") +
                          " WHERE id = :id AND state = 'WAITING'",
                      std::string(to_string(action)), now, id);
}

bool store::request_instance_action(instance_id id, instance_action action, timestamp now) {
    return update_one("requesting an operator action",
                      "UPDATE sequence_instance SET pending_action = :action, pending_action_requested_at = " + sql_timestamp(":at") +
                          " WHERE id = :id AND state = 'OPEN'",
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
        soci::statement st = (c.session().prepare << "SELECT 0, pending_action, " + requested_at +
                                                         " FROM sequence_instance WHERE id = :instance AND pending_action IS NOT NULL"
                                                         " UNION ALL SELECT id, pending_action, " +
                                                         requested_at +
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
