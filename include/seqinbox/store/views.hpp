#pragma once
// Read views for operators (docs/operations.md): counts per state and type, expired, expiring
// and longest-waiting instances, one instance with its messages, one message by id or key.
// Committed state only; a store that offers them models `view_store`.
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

struct instance_count {
    std::string sequence;
    instance_state state = instance_state::open;
    std::size_t count = 0;
};

struct message_count {
    std::string type;  ///< qualified type
    message_state state = message_state::waiting;
    std::size_t count = 0;
};

/// OPEN instances of one sequence past `share` of their retention (expiring) or all of it (expired).
struct retention_count {
    std::string sequence;
    std::size_t expiring = 0;
    std::size_t expired = 0;
};

/// One instance with its messages (without payloads), by id, and the pending actions.
struct instance_view {
    sequence_instance instance;
    std::vector<message_record> messages;
    pending_actions actions;
};

/// One message (without payload), its instance, and its pending request if any.
struct message_view {
    message_record message;
    sequence_instance instance;
    std::optional<message_request> pending;
};

/// An instance with WAITING messages: how many, and since when the oldest waits.
struct waiting_instance {
    sequence_instance instance;
    timestamp oldest_waiting_since{};
    std::size_t waiting = 0;
};

template <class S>
concept view_store = store_policy<S> && requires(S& s, const std::string& text, timestamp now, double share, std::size_t limit,
                                                 const scan_position& after, message_id message, instance_id instance,
                                                 const claim_key& key) {
    /// Instances per sequence and state, and messages per qualified type and state, sorted.
    { s.instance_counts() } -> std::same_as<std::vector<instance_count>>;
    { s.message_counts() } -> std::same_as<std::vector<message_count>>;
    /// Up to `limit` OPEN instances past retain_until at `now`, oldest retention first.
    { s.expired_instances(now, limit) } -> std::same_as<std::vector<sequence_instance>>;
    /// The same after `after` (retain_until, id), for the next page: pass the last row's.
    { s.expired_instances(now, limit, after) } -> std::same_as<std::vector<sequence_instance>>;
    /// Up to `limit` OPEN instances that used `share` (0..1) of their retention but not all of
    /// it, oldest retention first; paged as expired_instances.
    { s.expiring_instances(now, share, limit) } -> std::same_as<std::vector<sequence_instance>>;
    { s.expiring_instances(now, share, limit, after) } -> std::same_as<std::vector<sequence_instance>>;
    /// Up to `limit` instances (any state) with WAITING messages, the longest waiting first.
    { s.waiting_longest(limit) } -> std::same_as<std::vector<waiting_instance>>;
    /// Per sequence with OPEN instances, sorted: how many are expiring and expired at `now`.
    { s.retention_counts(now, share) } -> std::same_as<std::vector<retention_count>>;
    /// The instance (sequence, context id) with its messages, if it exists.
    { s.view_instance(text, text) } -> std::same_as<std::optional<instance_view>>;
    { s.view_instance(instance) } -> std::same_as<std::optional<instance_view>>;
    /// One message by id, or the newest row of a key (qualified type, idempotence id).
    { s.find_message(message) } -> std::same_as<std::optional<message_view>>;
    { s.find_message(key) } -> std::same_as<std::optional<message_view>>;
};

/// The position after `row` in the retention order of expired_instances and expiring_instances.
inline scan_position position_after(const sequence_instance& row) noexcept { return {row.retain_until, row.id}; }

/// request_message_action on the newest row of `key`. Not atomic with the lookup: a request
/// finds the state the row has when it is written.
template <class S>
    requires view_store<S> && action_store<S>
request_outcome request_message_action(S& store, const claim_key& key, message_action action, timestamp now) {
    const auto found = store.find_message(key);
    return found ? store.request_message_action(found->message.id, action, now) : request_outcome::not_found;
}

}  // namespace seqinbox
