#pragma once
// Read views for operators (docs/operations.md): counts per state and type, expired and expiring instances,
// one instance with its messages. Committed state only; a store that offers them models
// `view_store`.
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
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

template <class S>
concept view_store = store_policy<S> && requires(S& s, const std::string& text, timestamp now, double share, std::size_t limit) {
    /// Instances per sequence and state, and messages per qualified type and state, sorted.
    { s.instance_counts() } -> std::same_as<std::vector<instance_count>>;
    { s.message_counts() } -> std::same_as<std::vector<message_count>>;
    /// Up to `limit` OPEN instances past retain_until at `now`, oldest retention first.
    { s.expired_instances(now, limit) } -> std::same_as<std::vector<sequence_instance>>;
    /// Up to `limit` OPEN instances that used `share` (0..1) of their retention but not all of it.
    { s.expiring_instances(now, share, limit) } -> std::same_as<std::vector<sequence_instance>>;
    /// Per sequence with OPEN instances, sorted: how many are expiring and expired at `now`.
    { s.retention_counts(now, share) } -> std::same_as<std::vector<retention_count>>;
    /// The instance (sequence, context id) with its messages, if it exists.
    { s.view_instance(text, text) } -> std::same_as<std::optional<instance_view>>;
};

}  // namespace seqinbox
