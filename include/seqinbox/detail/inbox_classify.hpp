#pragma once
// basic_inbox, steps 1 and 2 of docs/processing.md: a delivery classified (decoded, its qualified
// type resolved, filtered, its context id extracted) and rejected, or run unsequenced.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// Steps 1 and 2: decode, resolve the qualified type, filter, extract the context id; the
/// delivery to sequence, or the result when it ends here. User callables that throw make the
/// delivery a bad message rather than one that never ends.
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::classify(const envelope& record, batch_effects* batch)
    -> std::variant<delivery_result, delivery> {
    std::optional<decoded<message_type>> decoded_message;
    try {
        decoded_message.emplace(decoder_.decode(record));
    } catch (...) {
        return reject(batch, record, rejection::undecodable, "undecodable: " + current_exception_text(), {}, {});
    }
    auto& m = *decoded_message;
    std::string qualified = m.type;
    const entry* type = nullptr;
    bool filtered_out = false;
    std::optional<std::string> context_id;
    std::optional<std::int64_t> number;
    try {
        if (const auto* resolver = catalog_.resolver(m.type)) qualified = qualify(m.type, resolver->resolve(m.message, record));
        type = catalog_.find(qualified);
        filtered_out = type != nullptr && type->declaration->filter && !type->declaration->filter(m.message, record);
        if (type != nullptr && !filtered_out) context_id = type->declaration->context_id(m.message, record);
        if (type != nullptr && !filtered_out && type->declaration->sequence_number) number = type->declaration->sequence_number(m.message, record);
    } catch (...) {
        return reject(batch, record, rejection::unclassifiable, "cannot classify message: " + current_exception_text(), qualified,
                      m.idempotence_id);
    }
    if (type == nullptr)
        return reject(batch, record, rejection::unknown_type, unknown_type_reason(m.type, qualified), qualified, m.idempotence_id,
                      qualified != m.type ? failure_kind::bad_subtype : failure_kind::unknown_type);
    delivery d{record, std::move(m.message), type, std::move(m.idempotence_id), {}};
    d.direct = filtered_out || ((!context_id || context_id->empty()) && handles_without_context_id(d));
    if (d.direct) return d;
    if (!context_id || context_id->empty()) return reject_without_context_id(batch, d);
    d.context_id = std::move(*context_id);
    if (d.type->declaration->sequence_number && (!number || *number < 0 || *number == std::numeric_limits<std::int64_t>::max()))
        return reject(batch, record, rejection::unclassifiable, no_number_reason(*d.type, number), qualified, d.idempotence_id);
    d.number = number;
    if (auto problem = unstorable(d); !problem.empty())
        return reject(batch, record, rejection::unstorable, problem, qualified, d.idempotence_id);
    return d;
}

template <class Store, class Source, class ErrorSink, class Policies>
std::optional<std::string> basic_inbox<Store, Source, ErrorSink, Policies>::context_id_of(const envelope& record) const noexcept {
    try {
        auto m = decoder_.decode(record);
        std::string qualified = m.type;
        if (const auto* resolver = catalog_.resolver(m.type)) qualified = qualify(m.type, resolver->resolve(m.message, record));
        const entry* type = catalog_.find(qualified);
        if (type == nullptr || (type->declaration->filter && !type->declaration->filter(m.message, record))) return std::nullopt;
        return type->declaration->context_id(m.message, record);
    } catch (...) {
        return std::nullopt;
    }
}

/// Why the store could not keep this delivery's keys or buffered record, or "".
template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::unstorable(const delivery& d) {
    return first_problem({claim_key_problem(d.type->qualified, d.idempotence_id), key_problem("context id", d.context_id),
                          record_problem(d.record)});
}

template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::no_number_reason(const entry& type, std::optional<std::int64_t> number) {
    // The largest number has no successor: the number expected after it would overflow.
    const std::string what = !number ? std::string("returned none")
                             : *number < 0 ? "returned the negative number " + std::to_string(*number)
                                           : "returned " + std::to_string(*number) + ", the largest 64-bit number (numbers go up to one below it)";
    return "no sequence number: the extractor of message type '" + detail::printable(type.qualified) + "' " + what;
}

template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::unknown_type_reason(const std::string& type, const std::string& qualified) {
    if (qualified != type)
        return "subtype '" + detail::printable(qualified.substr(type.size() + 1)) + "' of message type '" + detail::printable(type) +
               "' is not declared";
    return "unknown message type '" + detail::printable(type) + "'";
}

template <class Store, class Source, class ErrorSink, class Policies>
delivery_result basic_inbox<Store, Source, ErrorSink, Policies>::reject(batch_effects* batch, const envelope& record, rejection why,
                                                                        std::string reason, std::string type, std::string idempotence_id,
                                                                        std::optional<failure_kind> kind) {
    decision event = about(decision_kind::rejected, type, idempotence_id, {}, reason);
    event.rejection = why;
    decided(event);
    delivery_result result{outcome::rejected, std::move(type), std::move(idempotence_id), {}, 0, 0, why};
    publish(batch, {record, std::move(reason), result.qualified_type, result.idempotence_id, {}, kind.value_or(kind_of(why))});
    return result;
}

template <class Store, class Source, class ErrorSink, class Policies>
constexpr failure_kind basic_inbox<Store, Source, ErrorSink, Policies>::kind_of(rejection why) noexcept {
    switch (why) {
    case rejection::undecodable: return failure_kind::undecodable;
    case rejection::unclassifiable: return failure_kind::unclassifiable;
    case rejection::unknown_type: return failure_kind::unknown_type;
    case rejection::no_context_id: return failure_kind::no_context_id;
    case rejection::unstorable: return failure_kind::unstorable_key;
    case rejection::none: break;
    }
    return failure_kind::listener_failed;
}

/// Step 2, the extractor returned no context id: the type's declared policy decides.
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::handles_without_context_id(const delivery& d) {
    return d.type->declaration->missing_context_id == missing_context_id_policy::handle;
}

template <class Store, class Source, class ErrorSink, class Policies>
delivery_result basic_inbox<Store, Source, ErrorSink, Policies>::reject_without_context_id(batch_effects* batch, delivery& d) {
    return reject(batch, d.record, rejection::no_context_id,
                  "no context id: the extractor of message type '" + detail::printable(d.type->qualified) +
                      "' returned none, and its policy for a missing context id is dead-letter",
                  d.type->qualified, d.idempotence_id);
}

/// Step 2: not sequenced, so no claim and no inbox row.
template <class Store, class Source, class ErrorSink, class Policies>
delivery_result basic_inbox<Store, Source, ErrorSink, Policies>::handle_directly(batch_effects* batch, delivery& d) {
    delivery_result result{outcome::not_sequenced, d.type->qualified, d.idempotence_id, {}, 0, 0};
    try {
        invoke(d.message, d.record, *d.type, d.idempotence_id, d.context_id, false, nullptr);
    } catch (...) {
        const auto fault = current_fault();
        publish(batch, {d.record, fault.reason, d.type->qualified, d.idempotence_id, {}, fault.kind});
        result.outcome = outcome::failed;
    }
    decision event = about(d, decision_kind::not_sequenced);
    event.result = result.outcome;
    decided(event);
    return result;
}

}  // namespace seqinbox
