#pragma once
// What became of one delivery. Every value is a normal, durable outcome.
#include <cstddef>
#include <string>
#include <string_view>

namespace seqinbox {

enum class outcome {
    processed,      ///< the listener ran and the message is PROCESSED
    buffered,       ///< the release condition is not met yet: stored WAITING
    duplicate,      ///< already claimed or handled: skipped, nothing written
    not_sequenced,  ///< filtered out or without context id: handled directly, nothing stored
    failed,         ///< the listener threw: FAILED and in the error sink, retryable by a resend
    rejected,       ///< unknown type, undeclared subtype or undecodable: in the error sink
};

constexpr std::string_view to_string(outcome o) noexcept {
    switch (o) {
    case outcome::processed: return "processed";
    case outcome::buffered: return "buffered";
    case outcome::duplicate: return "duplicate";
    case outcome::not_sequenced: return "not_sequenced";
    case outcome::failed: return "failed";
    case outcome::rejected: return "rejected";
    }
    return "?";
}

/// Why a delivery was rejected (outcome::rejected). Metrics label a rejected delivery with this
/// name rather than with the type the record claims, which anyone can make up.
enum class rejection {
    none,            ///< not rejected
    undecodable,     ///< the decoder threw: no type or idempotence id could be read
    unclassifiable,  ///< a subtype resolver, filter or context id extractor threw
    unknown_type,    ///< the type, or its subtype, is not declared
    no_context_id,   ///< no context id, and the type's policy for that is dead-letter
    unstorable,      ///< a key, context id, topic or header name the store cannot keep
};

constexpr std::string_view to_string(rejection r) noexcept {
    switch (r) {
    case rejection::none: return "none";
    case rejection::undecodable: return "undecodable";
    case rejection::unclassifiable: return "unclassifiable";
    case rejection::unknown_type: return "unknown_type";
    case rejection::no_context_id: return "no_context_id";
    case rejection::unstorable: return "unstorable";
    }
    return "?";
}

struct delivery_result {
    seqinbox::outcome outcome = outcome::rejected;
    std::string qualified_type;
    std::string idempotence_id;
    std::string context_id;
    std::size_t released = 0;         ///< buffered messages released by this delivery
    std::size_t release_failures = 0;  ///< buffered messages that failed on release
    seqinbox::rejection rejection = rejection::none;
};

}  // namespace seqinbox
