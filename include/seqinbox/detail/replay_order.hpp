#pragma once
// The order in which operator actions replay messages (CONSUME_ALL, several CONSUMEs at once):
// the declared conditions' order, so that a listener sees a predecessor before its successors even
// when an operator forces them through.
#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

/// `rows` reordered: a row comes after every row of the types its type's condition names
/// (directly or through other types present), and by arrival (id) otherwise. A cycle of
/// conditions (an OR that names a successor) is broken by arrival. `dependents_of(type)` gives a
/// pointer to the types whose condition names `type`, or nullptr for an undeclared type.
template <class DependentsOf>
std::vector<message_record> in_replay_order(std::vector<message_record> rows, DependentsOf dependents_of) {
    std::ranges::sort(rows, {}, &message_record::id);
    struct pending_type {
        std::vector<std::size_t> rows;  ///< indexes into `rows`, by id
        std::size_t next = 0;
        std::size_t predecessors_left = 0;
        bool exhausted() const noexcept { return next == rows.size(); }
    };
    std::map<std::string, pending_type> types;
    for (std::size_t i = 0; i < rows.size(); ++i) types[rows[i].type].rows.push_back(i);
    auto for_each_dependent = [&](const std::string& type, auto visit) {
        if (const auto* dependents = dependents_of(type))
            for (const auto& dependent : *dependents)
                if (auto it = types.find(dependent); dependent != type && it != types.end()) visit(it->second);
    };
    for (const auto& [type, entry] : types) for_each_dependent(type, [](pending_type& d) { ++d.predecessors_left; });

    std::vector<message_record> ordered;
    ordered.reserve(rows.size());
    while (ordered.size() < rows.size()) {
        // The earliest row of a type whose predecessors are done; in a cycle, the earliest row left.
        pending_type* chosen = nullptr;
        const std::string* chosen_type = nullptr;
        for (bool ignore_conditions : {false, true}) {
            for (auto& [type, entry] : types)
                if (!entry.exhausted() && (ignore_conditions || entry.predecessors_left == 0) &&
                    (chosen == nullptr || entry.rows[entry.next] < chosen->rows[chosen->next])) {
                    chosen = &entry;
                    chosen_type = &type;
                }
            if (chosen != nullptr) break;
        }
        ordered.push_back(std::move(rows[chosen->rows[chosen->next++]]));
        if (chosen->exhausted()) for_each_dependent(*chosen_type, [](pending_type& d) { d.predecessors_left -= d.predecessors_left > 0; });
    }
    return ordered;
}

}  // namespace seqinbox::detail
