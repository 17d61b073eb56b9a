#pragma once
// What kind of failure sent a delivery to the error sink: a stable name for dashboards, dead-letter
// headers and `seqinbox redrive --kind`, beside the free text of the reason.
#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace seqinbox {

enum class failure_kind {
    listener_failed,          ///< the listener threw (first delivery or replay)
    undecodable,              ///< the decoder threw on the first delivery
    undecodable_on_replay,    ///< a buffered record no longer decodes (or none was kept) when replayed
    unknown_type,             ///< the message type is not declared
    bad_subtype,              ///< the subtype the resolver returned is not declared
    unclassifiable,           ///< a subtype resolver, filter or context id extractor threw
    no_context_id,            ///< no context id, and the type's policy for that is dead-letter
    unstorable_key,           ///< a key, context id, topic or header name the store cannot keep, or a record too large to buffer
    removed_by_housekeeping,  ///< still WAITING when housekeeping removed its instance
    publish_failed,           ///< the listener could not pass the message on (the relay's publication)
    buffer_overflow,          ///< it had to wait and its instance's buffer was full (a dead-letter overflow policy)
    gap_timeout,              ///< it waited behind a missing number longer than its sequence's gap timeout (gap policy dead-letter)
};

inline constexpr std::array all_failure_kinds{
    failure_kind::listener_failed, failure_kind::undecodable,   failure_kind::undecodable_on_replay,
    failure_kind::unknown_type,    failure_kind::bad_subtype,   failure_kind::unclassifiable, failure_kind::no_context_id,
    failure_kind::unstorable_key,  failure_kind::removed_by_housekeeping, failure_kind::publish_failed,
    failure_kind::buffer_overflow, failure_kind::gap_timeout,
};

constexpr std::string_view to_string(failure_kind k) noexcept {
    switch (k) {
    case failure_kind::listener_failed: return "listener_failed";
    case failure_kind::undecodable: return "undecodable";
    case failure_kind::undecodable_on_replay: return "undecodable_on_replay";
    case failure_kind::unknown_type: return "unknown_type";
    case failure_kind::bad_subtype: return "bad_subtype";
    case failure_kind::unclassifiable: return "unclassifiable";
    case failure_kind::no_context_id: return "no_context_id";
    case failure_kind::unstorable_key: return "unstorable_key";
    case failure_kind::removed_by_housekeeping: return "removed_by_housekeeping";
    case failure_kind::publish_failed: return "publish_failed";
    case failure_kind::buffer_overflow: return "buffer_overflow";
    case failure_kind::gap_timeout: return "gap_timeout";
    }
    return "unknown";
}

/// The kind named `name` (as to_string writes it), if any.
constexpr std::optional<failure_kind> parse_failure_kind(std::string_view name) noexcept {
    for (failure_kind k : all_failure_kinds)
        if (to_string(k) == name) return k;
    return std::nullopt;
}

/// A listener throws this to name the kind of its failure; any other exception is
/// `listener_failed`. Thread safety: an immutable value.
class listener_failure : public std::runtime_error {
public:
    listener_failure(failure_kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
    failure_kind kind() const noexcept { return kind_; }

private:
    failure_kind kind_;
};

}  // namespace seqinbox
