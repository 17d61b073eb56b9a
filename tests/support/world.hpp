#pragma once
// Shared test vocabulary: an order sequence, envelopes, and a recording listener.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/declare/example.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/envelope.hpp"

namespace seqinbox::testing {

using message = std::string;

/// The record key is the context id; no key or an empty one means "no context id".
inline context_id_extractor<message> key_as_context() { return example::record_key<message>(); }

inline message_declaration<message> declare(std::string type, condition release = {}, std::string subtype = {}) {
    return example::keyed_message<message>(std::move(type), std::move(release), std::move(subtype));
}

/// The order sequence of seqinbox/declare/example.hpp.
inline declarations<message> order_declarations() { return example::order_declarations<message>(); }

inline envelope record(const std::string& type, const std::string& idempotence_id, const std::string& context_id,
                       std::string value = {}) {
    envelope e;
    e.key = context_id;
    e.value = value.empty() ? type + ":" + idempotence_id : std::move(value);
    e.headers = {{"message-type", type}, {"idempotence-id", idempotence_id}};
    e.topic = "orders";
    return e;
}

/// What the listeners saw, in order. Thread-safe.
class call_log {
public:
    struct call {
        std::string type;
        std::string idempotence_id;
        std::string context_id;
        bool replayed;
    };

    void add(call c) {
        std::lock_guard lock(mutex_);
        calls_.push_back(std::move(c));
    }
    std::vector<call> calls() const {
        std::lock_guard lock(mutex_);
        return calls_;
    }
    std::size_t count(const std::string& type, const std::string& idempotence_id) const {
        std::lock_guard lock(mutex_);
        return std::ranges::count_if(calls_, [&](const call& c) { return c.type == type && c.idempotence_id == idempotence_id; });
    }
    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return calls_.size();
    }
    /// The types handled for one context, in order.
    std::vector<std::string> order_of(const std::string& context_id) const {
        std::lock_guard lock(mutex_);
        std::vector<std::string> types;
        for (const auto& c : calls_)
            if (c.context_id == context_id) types.push_back(c.type);
        return types;
    }

private:
    mutable std::mutex mutex_;
    std::vector<call> calls_;
};

/// Registers a recording listener for every declared type of `inbox`.
template <class Inbox>
void record_all(Inbox& inbox, call_log& log) {
    for (const auto& seq : inbox.declared().sequences)
        for (const auto& msg : seq.messages)
            inbox.on(msg.qualified_type(), [&log](const message&, const typename Inbox::context& ctx) {
                log.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
            });
}

}  // namespace seqinbox::testing
