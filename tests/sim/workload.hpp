#pragma once
// A random workload per seed: logical messages in a few contexts, each sent once or more (the
// copies are duplicates), every copy to a random simulated consumer, all copies in one shuffled
// arrival order (so successors often arrive before their predecessors).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "random.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/store/model.hpp"
#include "support/world.hpp"

namespace seqinbox::sim {

struct logical_message {
    std::string type;
    std::string id;       ///< idempotence id, unique in the workload
    std::string context;  ///< context id (the record key)
    std::optional<std::int64_t> number{};  ///< its sequence number (header `seq`), numbered seeds only

    claim_key key() const { return {type, id}; }
};

struct planned_delivery {
    std::size_t message;   ///< index into workload::messages
    std::size_t consumer;  ///< which simulated consumer receives it
};

struct workload {
    std::size_t consumers = 0;
    std::vector<logical_message> messages;
    std::vector<planned_delivery> deliveries;  ///< in arrival order

    envelope record_of(const planned_delivery& d) const {
        const auto& m = messages[d.message];
        envelope e = testing::record(m.type, m.id, m.context);
        if (m.number) e.headers.push_back({"seq", std::to_string(*m.number)});
        return e;
    }
};

inline void add_messages_of_context(workload& w, const sequence_declaration<testing::message>& seq, const std::string& context,
                                    random& rng) {
    for (const auto& declared : seq.messages) {
        const std::size_t count = rng.chance(85) ? (rng.chance(10) ? 2 : 1) : 0;
        for (std::size_t i = 0; i < count; ++i)
            w.messages.push_back({declared.qualified_type(), "m" + std::to_string(w.messages.size()), context});
    }
}

inline std::size_t copies(random& rng) {
    if (rng.chance(10)) return 3;
    return rng.chance(35) ? 2 : 1;
}

/// Every logical message sent 1 to 3 times, each copy to a random consumer, in one shuffled order.
inline void plan_deliveries(workload& w, random& rng) {
    for (std::size_t m = 0; m < w.messages.size(); ++m)
        for (std::size_t n = copies(rng); n > 0; --n) w.deliveries.push_back({m, rng.below(w.consumers)});
    rng.shuffle(w.deliveries);
}

inline workload random_workload(const declarations<testing::message>& decls, random& rng) {
    workload w;
    w.consumers = rng.between(2, 4);
    const std::size_t contexts = rng.between(1, 4);
    for (std::size_t c = 0; c < contexts; ++c) add_messages_of_context(w, decls.sequences.front(), "ctx" + std::to_string(c), rng);
    plan_deliveries(w, rng);
    return w;
}

}  // namespace seqinbox::sim
