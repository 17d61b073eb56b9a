#pragma once
// basic_inbox's release pass of numbered sequences (README, "Numbered sequences"): the WAITING
// numbers that follow the highest released are replayed in number order under the instance lock.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqinbox/detail/numbered_instance.hpp"
#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// One page of rows in memory at a time, until a number is missing or a replay fails (its number
/// stays missing); a page read to its end is followed by another.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::release_numbered(scope& s, locked_instance& locked, const numbering_rules& rules,
                                                                       const std::string& context_id, delivery_result& result) {
    constexpr std::size_t page = 64;
    for (;;) {
        const std::optional<std::int64_t> first = detail::expected_number(s.t1, locked, rules);
        if (!first) return;
        std::int64_t next = *first;
        const std::vector<message_record> rows = detail::numbered_from(s.t1, locked, next, page);
        if (rows.empty()) return;
        for (const message_record& row : rows) {
            if (*row.number < next) continue;  // a second row of a number released just now
            if (*row.number != next) return;
            const bool replayed = replay(s, row, {}, context_id);
            locked.settle(row);
            if (!replayed) {
                ++result.release_failures;
                return;
            }
            ++result.released;
            locked.last_number = next++;
        }
    }
}

/// The numbering of the sequence named `sequence` when it is numbered, else nullptr.
template <class Store, class Source, class ErrorSink, class Policies>
const numbering_rules* basic_inbox<Store, Source, ErrorSink, Policies>::numbering_of(const std::string& sequence) const {
    for (const auto& seq : catalog_.declared().sequences)
        if (seq.name == sequence) return seq.numbered() ? &seq.numbering : nullptr;
    return nullptr;
}

}  // namespace seqinbox
