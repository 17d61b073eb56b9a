#pragma once
// The rows every store keeps (docs/processing.md, vocabulary): sequence instances, sequenced messages, claims.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/envelope.hpp"

namespace seqinbox {

using instance_id = std::int64_t;
using message_id = std::int64_t;

enum class message_state { waiting, processed, failed };
enum class instance_state { open, closed };

constexpr std::string_view to_string(message_state s) noexcept {
    switch (s) {
    case message_state::waiting: return "WAITING";
    case message_state::processed: return "PROCESSED";
    case message_state::failed: return "FAILED";
    }
    return "?";
}

constexpr std::string_view to_string(instance_state s) noexcept {
    return s == instance_state::open ? "OPEN" : "CLOSED";
}

/// The claim key: (qualified type, idempotence id). The sequence is not part of it because a
/// qualified type belongs to at most one sequence.
struct claim_key {
    std::string type;
    std::string idempotence_id;
    friend bool operator==(const claim_key&, const claim_key&) = default;
    friend auto operator<=>(const claim_key&, const claim_key&) = default;
};

struct sequence_instance {
    instance_id id = 0;
    std::string sequence;
    std::string context_id;
    instance_state state = instance_state::open;
    timestamp created_at{};
    timestamp retain_until{};
    std::optional<timestamp> remove_after;
};

/// The distinct qualified types of an instance's PROCESSED and of its WAITING messages.
/// `waiting_rows`: how many WAITING rows, when the store counted them with the types at no extra
/// cost (PostgreSQL); empty: the engine asks count_waiting when it needs the number.
struct types_by_state {
    std::vector<std::string> processed;
    std::vector<std::string> waiting;
    std::optional<std::size_t> waiting_rows{};
};

/// A sequenced message row. `payload` is kept while the message waits (buffered delivery).
struct message_record {
    message_id id = 0;
    instance_id instance = 0;
    std::string type;  ///< qualified type
    std::string idempotence_id;
    message_state state = message_state::waiting;
    timestamp created_at{};
    timestamp state_changed_at{};
    std::optional<envelope> payload;
    std::optional<std::int64_t> number{};  ///< its sequence number, in a numbered sequence only

    claim_key key() const { return {type, idempotence_id}; }
};

/// What a transaction knows once it holds an instance's row lock: the row and the instance's
/// types, read under the lock.
struct instance_lock {
    sequence_instance row;
    types_by_state types;
};

/// A delivery's claim on its key, referencing the instance it is to be sequenced in.
struct claim_request {
    claim_key key;
    instance_id instance = 0;
    timestamp now{};
};

/// The answer to a claim_request. Only a won claim carries the rest: the instance locked with
/// its types, and the key's rows read after the lock was taken.
struct claim_result {
    bool won = false;
    instance_lock locked;
    std::vector<message_record> rows;  ///< every row with the key (more than one in old databases)
};

/// One sequence instance to create or get (a store's create_or_get_instances).
struct instance_creation {
    std::string sequence;
    std::string context_id;
    timestamp created_at{};
    timestamp retain_until{};
};

/// The WAITING messages of `types` in one instance (a transaction's waiting_messages for many
/// instances at once).
struct waiting_query {
    instance_id instance = 0;
    std::vector<std::string> types;
};

/// What store_message did with the row it was given.
enum class stored_as {
    inserted,       ///< no row had the key: the row was inserted
    updated,        ///< existing rows of the key took the row's state (see store_message)
    left_existing,  ///< a row of the key that outranks the given one exists: nothing was written
};

}  // namespace seqinbox
