#pragma once
// The order sequence that `seqinbox demo` plays and the tests exercise: declared here once, so
// that the demo's verification and the tests check the same declaration.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
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

/// The sequence number in header `name`: its whole text as a decimal number; else none.
template <class Message>
sequence_number_extractor<Message> header_number(std::string name) {
    return [name = std::move(name)](const Message&, const envelope& e) -> std::optional<std::int64_t> {
        const auto text = e.find_header(name);
        std::int64_t n = 0;
        if (!text || text->empty()) return std::nullopt;
        const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
        if (ec != std::errc{} || end != text->data() + text->size()) return std::nullopt;
        return n;
    };
}

/// LedgerSequence, retained 24 hours, numbered by the header `seq` from 1: types LedgerEntry and
/// LedgerCorrection share the numbers of a context (the record key).
template <class Message>
declarations<Message> ledger_declarations() {
    sequence_declaration<Message> seq;
    seq.name = "LedgerSequence";
    seq.retention = std::chrono::hours(24);
    for (const char* type : {"LedgerEntry", "LedgerCorrection"}) {
        auto m = keyed_message<Message>(type);
        m.sequence_number = header_number<Message>("seq");
        seq.messages.push_back(std::move(m));
    }
    declarations<Message> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

}  // namespace seqinbox::example
