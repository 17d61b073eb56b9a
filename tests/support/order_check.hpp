#pragma once
// Checks a listener order of one context against the declared release conditions.
#include <set>
#include <string>
#include <vector>

#include "seqinbox/declare/sequence.hpp"

namespace seqinbox::testing {

/// Empty when `handled` (qualified types in listener order) respects every release condition;
/// otherwise what went wrong.
template <class Message>
std::string order_violation(const declarations<Message>& decls, const std::vector<std::string>& handled) {
    std::set<std::string> done;
    for (const auto& type : handled) {
        const condition* release = nullptr;
        for (const auto& seq : decls.sequences)
            for (const auto& msg : seq.messages)
                if (msg.qualified_type() == type) release = &msg.release;
        if (release == nullptr) return "undeclared type " + type;
        if (!release->satisfied([&](const std::string& t) { return done.contains(t); })) {
            std::string order;
            for (const auto& t : handled) order += (order.empty() ? "" : ", ") + t;
            return type + " ran before its predecessors in [" + order + "]";
        }
        done.insert(type);
    }
    return {};
}

}  // namespace seqinbox::testing
