// Operator actions (seqinbox::action_store): a request locks its row (FOR UPDATE, waiting at most
// store_options::request_lock_timeout, as SET STATEMENT innodb_lock_wait_timeout), writes the
// pending_action column when the row's state allows it, and commits; the engine reads requests
// under the instance lock and clears what it executed with its commit.
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "codec.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::microseconds_of;
using detail::number_at;
using detail::parse_instance_action;
using detail::text_at;
using detail::time_literal;

namespace {

/// A message row holds the record it arrived with (a direct failure stores none).
constexpr std::string_view holds_record = "record_headers IS NOT NULL";

message_action parse_message_action(std::string_view s) { return s == "CONSUME" ? message_action::consume : message_action::expire; }

}  // namespace

request_outcome store::requested(std::string_view target, std::string_view table, std::string_view allowed, std::string_view action,
                                 timestamp now, std::int64_t id, request_outcome (*refused)(std::string_view state, bool has_record)) {
    const auto seconds = static_cast<long long>(std::ceil(static_cast<double>(options().request_lock_timeout.count()) / 1000.0));
    const std::string where = " WHERE id = " + std::to_string(id);
    const std::string doing = "requesting an operator action on " + std::string(target);
    try {
        auto tx = begin();
        std::optional<std::pair<std::string, bool>> found;  // state, holds a record
        // The row's lock: a delivery in progress holds it (an instance row's foreign key share
        // locks, a message row it changed) while its listeners run.
 const bool message = table == "sequenced_message";
        tx.impl_->rows(doing, "SET STATEMENT innodb_lock_wait_timeout = " + std::to_string(std::max(1LL, seconds)) +
                                  " FOR SELECT state, " + std::string(message ? holds_record : "0") + " FROM " + std::string(table) + where + " FOR UPDATE",
                       [&](const detail::row& r) { found = std::pair{text_at(r, 0), number_at(r, 1) != 0}; });
        if (!found) return request_outcome::not_found;
        const auto& [state, has_record] = *found;
        if (!(state == allowed || (message && state == "FAILED" && has_record))) return refused(state, has_record);
        tx.impl_->run(doing, "UPDATE " + std::string(table) + " SET pending_action = '" + std::string(action) +
                                 "', pending_action_requested_at = " + time_literal(now) + where);
        tx.commit();
        return request_outcome::accepted;
    } catch (const error& e) {
        if (e.category() == error_category::retryable && e.sqlstate() == "HY000") throw request_locked(target);  // 1205
        throw;
    }
}

request_outcome store::request_message_action(message_id id, message_action action, timestamp now) {
    return requested("message " + std::to_string(id), "sequenced_message", "WAITING", to_string(action), now, id,
                     [](std::string_view state, bool has_record) {
                         return state == "FAILED" && !has_record ? request_outcome::no_record : request_outcome::wrong_state;
                     });
}

request_outcome store::request_instance_action(instance_id id, instance_action action, timestamp now) {
    return requested("instance " + std::to_string(id), "sequence_instance", "OPEN", to_string(action), now, id,
                     [](std::string_view, bool) { return request_outcome::wrong_state; });
}

std::vector<instance_id> store::instances_with_pending_actions(std::size_t limit) {
    return detail::autocommitted(*pool_, "finding pending operator actions", [&](detail::connection& c) {
        std::vector<instance_id> ids;
        c.rows("SELECT id FROM (SELECT id, pending_action_requested_at AS at FROM sequence_instance WHERE pending_action IS NOT NULL"
               " UNION ALL SELECT sequence_instance_id, pending_action_requested_at FROM sequenced_message"
               " WHERE pending_action IS NOT NULL) p GROUP BY id ORDER BY min(at), id LIMIT " + std::to_string(limit),
               [&](const detail::row& r) { ids.push_back(number_at(r, 0)); });
        return ids;
    });
}

pending_actions store::transaction::pending_actions(instance_id instance) {
    seqinbox::pending_actions actions;
    const std::string requested_at = microseconds_of("pending_action_requested_at"), id = std::to_string(instance);
    // Message ids start at 1: row 0 is the instance's own action.
    impl_->rows("reading pending operator actions",
                "SELECT 0, pending_action, " + requested_at + " FROM sequence_instance WHERE id = " + id +
                    " AND pending_action IS NOT NULL UNION ALL SELECT id, pending_action, " + requested_at +
                    " FROM sequenced_message WHERE sequence_instance_id = " + id + " AND pending_action IS NOT NULL ORDER BY 1",
                [&](const detail::row& r) {
                    const auto at = detail::from_microseconds(number_at(r, 2));
                    if (number_at(r, 0) == 0)
                        actions.on_instance = instance_request{parse_instance_action(text_at(r, 1)), at};
                    else
                        actions.on_messages.push_back({number_at(r, 0), parse_message_action(text_at(r, 1)), at});
                });
    return actions;
}

std::vector<message_record> store::transaction::action_targets(instance_id instance, std::span<const message_id> ids) {
    std::vector<message_record> found;
    if (ids.empty()) return found;
    impl_->rows("reading the messages of operator actions",
                "SELECT " + detail::message_columns_with_record() + " FROM sequenced_message m WHERE m.sequence_instance_id = " +
                    std::to_string(instance) + " AND m.id IN (" + detail::listed(ids, [](message_id id) { return std::to_string(id); }) +
                    ") AND (m.state = 'WAITING' OR (m.state = 'FAILED' AND m." + std::string(holds_record) + ")) ORDER BY m.id",
                [&](const detail::row& r) { found.push_back(detail::message_at(r, true)); });
    return found;
}

// A request made after the read, or replacing one read (another action or time), no longer
// matches and stays pending. Sent with the commit: an UPDATE of the instance row would hold it
// exclusively, and a state step on another connection inserting a child row would wait for it.
void store::transaction::clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
    const auto clear = [](std::string_view table, std::int64_t id, std::string_view action, timestamp at) {
        return "UPDATE " + std::string(table) + " SET pending_action = NULL, pending_action_requested_at = NULL WHERE id = " +
               std::to_string(id) + " AND pending_action = '" + std::string(action) + "' AND pending_action_requested_at = " +
               time_literal(at);
    };
    if (const auto& request = read.on_instance)
        impl_->at_commit.emplace_back("clearing operator actions",
                                      clear("sequence_instance", instance, to_string(request->action), request->requested_at));
    for (const auto& request : read.on_messages)
        impl_->at_commit.emplace_back("clearing operator actions",
                                      clear("sequenced_message", request.message, to_string(request.action), request.requested_at));
}

}  // namespace seqinbox::mariadb
