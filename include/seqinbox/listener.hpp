#pragma once
// What a listener receives besides the decoded message.
#include <functional>
#include <string>
#include <string_view>

#include "seqinbox/envelope.hpp"

namespace seqinbox {

template <class Transaction>
struct listener_context {
    const envelope& record;             ///< the delivery, or the stored copy when replayed
    const std::string& qualified_type;
    const std::string& idempotence_id;
    const std::string& context_id;      ///< empty for a message that is not sequenced
    bool replayed;                      ///< released from the buffer rather than delivered now
    /// The transaction the listener may write in: T1 under propagation::required, a fresh one
    /// under requires_new, nullptr under not_supported (the default).
    Transaction* transaction;

    /// The W3C trace context of the delivery (restored from storage on replay), or empty.
    std::string_view traceparent() const { return record.find_header(traceparent_header).value_or(""); }
};

/// A listener completes normally when the message is handled; any exception means failure.
template <class Message, class Transaction>
using listener = std::function<void(const Message&, const listener_context<Transaction>&)>;

}  // namespace seqinbox
