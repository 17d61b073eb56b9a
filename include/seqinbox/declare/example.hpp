#pragma once
// The order sequence that `seqinbox demo` plays and the tests exercise: declared here once, so
// that the demo's verification and the tests check the same declaration.
#include <chrono>
#include <string>
#include <utility>

#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/envelope.hpp"

namespace seqinbox::example {

/// The context id is the record key (as the YAML loader's built-in `key`); no key: none.
template <class Message>
context_id_extractor<Message> record_key() {
    return [](const Message&, const envelope& e) { return e.key; };
}

/// A message type whose context id is the record key.
template <class Message>
message_declaration<Message> keyed_message(std::string type, condition release = {}, std::string subtype = {}) {
    message_declaration<Message> m;
    m.type = std::move(type);
    m.subtype = std::move(subtype);
    m.context_id = record_key<Message>();
    m.release = std::move(release);
    return m;
}

/// OrderSequence, retained 24 hours: Created; Validated, Prepared and Expedited after Created;
/// Shipped after Validated and (Prepared or Expedited).
template <class Message>
declarations<Message> order_declarations() {
    const auto declare = [](std::string type, condition release = {}) { return keyed_message<Message>(std::move(type), std::move(release)); };
    sequence_declaration<Message> seq;
    seq.name = "OrderSequence";
    seq.retention = std::chrono::hours(24);
    seq.messages = {declare("OrderCreated"), declare("OrderValidated", after("OrderCreated")),
                    declare("OrderPrepared", after("OrderCreated")), declare("OrderExpedited", after("OrderCreated")),
                    declare("OrderShipped", all_of({after("OrderValidated"), any_of({after("OrderPrepared"), after("OrderExpedited")})}))};
    declarations<Message> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

}  // namespace seqinbox::example
