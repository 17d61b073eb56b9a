#pragma once
// Declarations in C++: sequences, their message types and release conditions.
// Templated on the decoded message type that extractors, filters and resolvers read.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/declare/qualified_type.hpp"
#include "seqinbox/envelope.hpp"

namespace seqinbox {

/// Returns the context id of a message, or nothing: then its type's missing_context_id policy applies.
template <class Message>
using context_id_extractor = std::function<std::optional<std::string>(const Message&, const envelope&)>;

/// Returns the sequence number of a message of a numbered sequence, or nothing: the message is
/// then a bad message (error sink). Numbers are not negative.
template <class Message>
using sequence_number_extractor = std::function<std::optional<std::int64_t>(const Message&, const envelope&)>;

/// Returns false for a message that must bypass the inbox (handled directly, never claimed).
template <class Message>
using message_filter = std::function<bool(const Message&, const envelope&)>;

/// What happens to a message whose extractor returns no context id (or an empty one), docs/processing.md step 2.
enum class missing_context_id_policy {
    handle,       ///< the listener is invoked directly, like a filtered message (the library's default)
    dead_letter,  ///< the delivery is a bad message: error sink, acknowledged, no listener
};

template <class Message>
struct message_declaration {
    std::string type{};
    std::string subtype{};  ///< empty: the type has no subtypes
    context_id_extractor<Message> context_id{};
    message_filter<Message> filter{};  ///< empty: every message is sequenced
    condition release{};               ///< default: released immediately
    std::string topic{};               ///< empty: the source's default topic
    std::string cluster{};             ///< empty: the default cluster
    missing_context_id_policy missing_context_id = missing_context_id_policy::handle;
    /// Set on every type of a numbered sequence (none of which then declares a release condition),
    /// on none of another sequence's.
    sequence_number_extractor<Message> sequence_number{};

    std::string qualified_type() const { return qualify(type, subtype); }
};

template <class Message>
struct sequence_declaration {
    std::string name{};
    std::chrono::seconds retention{0};  ///< must be positive
    std::vector<message_declaration<Message>> messages{};
    /// Recording mode (docs/operations.md): before this instant every message of the sequence is handled at
    /// once and recorded PROCESSED, never buffered, so that a sequence can be introduced on a live
    /// topic whose predecessors were sent before the inbox existed. From it on: full sequencing.
    std::optional<timestamp> recording_until{};
    /// How long a CLOSED instance is kept after closing, so that late duplicates of its messages
    /// are still recognised (after it they are processed as new). Empty: the retention. Not negative.
    std::optional<std::chrono::seconds> deduplication_window{};
    /// How many messages one instance may keep WAITING, and what happens beyond (buffer_limit.hpp).
    buffer_limit buffer{};
    /// Used when the types declare sequence numbers (numbering.hpp).
    numbering_rules numbering{};

    /// Whether the messages are ordered by their sequence numbers rather than release conditions.
    bool numbered() const { return !messages.empty() && static_cast<bool>(messages.front().sequence_number); }

    std::chrono::seconds kept_closed_for() const { return deduplication_window.value_or(retention); }
};

/// Resolves the subtype of a message of one type; `subtypes` lists every value it can return.
template <class Message>
struct subtype_resolver {
    std::function<std::string(const Message&, const envelope&)> resolve{};
    std::vector<std::string> subtypes{};
};

template <class Message>
struct declarations {
    std::vector<sequence_declaration<Message>> sequences{};
    std::map<std::string, subtype_resolver<Message>> resolvers;  ///< by message type
};

}  // namespace seqinbox
