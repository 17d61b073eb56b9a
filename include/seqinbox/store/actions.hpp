#pragma once
// Operator actions (docs/operations.md): written as pending actions, executed by a job under the instance
// lock (basic_inbox::run_pending_actions). A store that keeps them models `action_store`.
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// On a WAITING message, or a FAILED one that kept its record (a failed replay), in any
/// instance state: replay it now whatever its condition, or mark it PROCESSED unreplayed.
enum class message_action { consume, expire };
/// On an OPEN instance: replay every WAITING message now, or close it without replay; on an OPEN
/// instance of a numbered sequence, give the numbers missing before its first WAITING one up
/// and release what follows (README, "Numbered sequences").
enum class instance_action { consume_all, close, skip_gap };

constexpr std::string_view to_string(message_action a) noexcept { return a == message_action::consume ? "CONSUME" : "EXPIRE"; }
constexpr std::string_view to_string(instance_action a) noexcept {
    switch (a) {
    case instance_action::consume_all: return "CONSUME_ALL";
    case instance_action::close: return "CLOSE";
    case instance_action::skip_gap: return "SKIP_GAP";
    }
    return "?";
}

/// What a request found. Only `accepted` wrote a request.
enum class request_outcome {
    accepted,
    not_found,    ///< no message (instance) with that id or key
    wrong_state,  ///< a PROCESSED message; a CLOSED instance
    no_record,    ///< a FAILED message without a record to replay: it failed on its first delivery
};

constexpr bool accepted(request_outcome o) noexcept { return o == request_outcome::accepted; }

constexpr std::string_view to_string(request_outcome o) noexcept {
    switch (o) {
    case request_outcome::accepted: return "accepted";
    case request_outcome::not_found: return "not_found";
    case request_outcome::wrong_state: return "wrong_state";
    case request_outcome::no_record: return "no_record";
    }
    return "unknown";
}

/// Why a request was refused, for an operator: `target` names what was asked for ("message 7").
inline std::string refusal_text(request_outcome o, std::string_view target) {
    const std::string t(target);
    switch (o) {
    case request_outcome::not_found: return "no " + t;
    case request_outcome::wrong_state:
        return t + " is not in a state the action takes (a message must be WAITING or FAILED, an instance OPEN)";
    case request_outcome::no_record:
        return t + " FAILED on its first delivery and holds no record to replay; resend it (seqinbox redrive) instead";
    case request_outcome::accepted: break;
    }
    return t + ": " + std::string(to_string(o));
}

/// What a request throws when the row it must lock (`target`: "instance 7") stays locked past
/// the store's request lock timeout: a delivery in progress holds it while its listeners run.
/// Retryable, with PostgreSQL's SQLSTATE for a lock timeout.
inline error request_locked(std::string_view target) {
    return error(error_category::retryable, std::string(target) + " is locked by a delivery in progress; try again", "55P03");
}

/// A pending request on an instance. Its action and time tell it from a request that replaced
/// it, so that clearing what a job read spares a request made since.
struct instance_request {
    instance_action action;
    timestamp requested_at;

    bool operator==(const instance_request&) const = default;
};
/// A pending request on a message; see instance_request.
struct message_request {
    message_id message;
    message_action action;
    timestamp requested_at;

    bool operator==(const message_request&) const = default;
};

/// The requests pending on one instance and its messages (messages by id).
struct pending_actions {
    std::optional<instance_request> on_instance;
    std::vector<message_request> on_messages;

    bool empty() const noexcept { return !on_instance && on_messages.empty(); }
};

template <class S>
concept action_store =
    store_policy<S> && requires(S& s, typename S::transaction& tx, message_id message, instance_id instance, timestamp now,
                         std::size_t limit, const pending_actions& read, std::span<const message_id> ids) {
        /// Writes the action on a WAITING message or a FAILED one with its record, committed at
        /// once (a later request replaces an earlier one). Waits for the row's lock a short
        /// while only (the store's request lock timeout), then throws request_locked.
        { s.request_message_action(message, message_action::consume, now) } -> std::same_as<request_outcome>;
        /// Writes the action on an OPEN instance, committed at once; request_locked as above.
        { s.request_instance_action(instance, instance_action::close, now) } -> std::same_as<request_outcome>;
        /// Up to `limit` instances with a pending action of their own or of one of their
        /// messages, the oldest request first.
        { s.instances_with_pending_actions(limit) } -> std::same_as<std::vector<instance_id>>;
        /// The instance's pending actions; read under its lock.
        { tx.pending_actions(instance) } -> std::same_as<pending_actions>;
        /// The messages `ids` of the instance that an action can still run on (WAITING, or FAILED
        /// with a record), with their records, by id; read under its lock.
        { tx.action_targets(instance, ids) } -> std::same_as<std::vector<message_record>>;
        /// Clears the requests `read` (what pending_actions returned) that are still pending
        /// unchanged. A message request does not wait for the instance lock, so one made after
        /// the read, or replacing a request read (another action or a later time), stays
        /// pending for the next run.
        { tx.clear_actions(instance, read) } -> std::same_as<void>;
    };

}  // namespace seqinbox
