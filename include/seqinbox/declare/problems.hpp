#pragma once
// Start-up validation of declarations: every problem at once, each naming the offending
// sequence, type or name. The checks run on a type-erased "shape" of the declarations, so that
// they are compiled once in the core library (src/declare/problems.cpp), whatever the message type.
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/qualified_type.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/error.hpp"  // what validate() throws

namespace seqinbox {

/// One invalid declaration. `sequence` and `message_index` index `declarations::sequences` and
/// that sequence's `messages` (npos when the problem is not about one of them), so that a
/// loader can attach the file:line:col of the offending node.
struct declaration_problem {
    static constexpr std::size_t npos = std::size_t(-1);

    std::string message;
    std::size_t sequence = npos;
    std::size_t message_index = npos;

    friend bool operator==(const declaration_problem&, const declaration_problem&) = default;
};

namespace detail {

// ---- the shape: what validation needs to know, without the message type ----

struct message_shape {
    std::string type;
    std::string subtype;
    bool has_context_id = false;
    condition release;
    std::string topic;
    std::string cluster;
    bool has_sequence_number = false;

    std::string qualified_type() const { return qualify(type, subtype); }
};

struct sequence_shape {
    std::string name;
    std::chrono::seconds retention{0};
    std::vector<message_shape> messages;
    std::optional<std::chrono::seconds> deduplication_window;
    std::optional<std::size_t> max_waiting;
    numbering_rules numbering;
};

struct resolver_shape {
    bool has_resolve = false;
    std::vector<std::string> subtypes;
};

struct declarations_shape {
    std::vector<sequence_shape> sequences;
    std::map<std::string, resolver_shape> resolvers;  ///< by message type
};

template <class Message>
sequence_shape shape_of(const sequence_declaration<Message>& seq) {
    sequence_shape s{seq.name, seq.retention, {}, seq.deduplication_window, seq.buffer.max_waiting, seq.numbering};
    for (const auto& m : seq.messages)
        s.messages.push_back({m.type, m.subtype, static_cast<bool>(m.context_id), m.release, m.topic, m.cluster,
                              static_cast<bool>(m.sequence_number)});
    return s;
}

template <class Message>
declarations_shape shape_of(const declarations<Message>& decls) {
    declarations_shape shape;
    for (const auto& seq : decls.sequences) shape.sequences.push_back(shape_of(seq));
    for (const auto& [type, resolver] : decls.resolvers)
        shape.resolvers.emplace(type, resolver_shape{static_cast<bool>(resolver.resolve), resolver.subtypes});
    return shape;
}

/// All problems of a shape, in this order: names, retention and messages of every sequence;
/// numbering of every sequence; release conditions; unreleasable types per sequence; duplicate
/// qualified types; subtypes and topics by type (in order of first declaration); resolvers by
/// type name.
std::vector<declaration_problem> find_problems(const declarations_shape& shape);

/// Throws the configuration error listing `problems`, if there is any.
void throw_if_any(const std::vector<declaration_problem>& problems);

/// The release fixpoint: indices of `messages` in the order the least fixpoint of releasable
/// types reaches them, round by round (a round holds the types whose conditions hold once the
/// earlier rounds are PROCESSED, in declaration order). Each qualified type appears once (its
/// first declaration); messages without a type and types that can never be released are left out.
std::vector<std::size_t> release_order(const std::vector<message_shape>& messages);

/// `'a', 'b', 'c'`, or `none` for an empty list.
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace detail

/// Every problem of `decls`, in a deterministic order; empty when they are valid.
template <class Message>
std::vector<declaration_problem> find_problems(const declarations<Message>& decls) {
    return detail::find_problems(detail::shape_of(decls));
}

/// Indices of `seq`'s messages in release order (see detail::release_order): what `seqinbox
/// validate` lists, and what start-up validation checks every declared type is part of.
template <class Message>
std::vector<std::size_t> release_order(const sequence_declaration<Message>& seq) {
    return detail::release_order(detail::shape_of(seq).messages);
}

/// Throws `seqinbox::error` (category `configuration`) with one detail per problem of `decls`.
template <class Message>
void validate(const declarations<Message>& decls) {
    detail::throw_if_any(find_problems(decls));
}

}  // namespace seqinbox
