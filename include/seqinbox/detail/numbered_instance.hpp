#pragma once
// What the engine asks of a locked instance of a numbered sequence (README, "Numbered sequences"):
// the number it expects next, whether a number is a duplicate, and the WAITING rows from a number
// on, counting a batch's unstored rows.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/detail/locked_instance.hpp"

namespace seqinbox::detail {

/// The number the locked instance expects next; empty for a context that starts at the first
/// number it sees and has had none released.
template <class Transaction>
std::optional<std::int64_t> expected_number(Transaction& t1, locked_instance<Transaction>& locked, const numbering_rules& rules) {
    if (!locked.last_number_read) {
        locked.last_number = t1.last_released_number(locked.row.id);
        locked.last_number_read = true;
    }
    if (locked.last_number) return *locked.last_number + 1;
    return rules.first_number;
}

/// Records that `number` was released (a recording sequence may release numbers out of order).
template <class Transaction>
void note_released(Transaction& t1, locked_instance<Transaction>& locked, const numbering_rules& rules, std::int64_t number) {
    expected_number(t1, locked, rules);
    locked.last_number = std::max(locked.last_number.value_or(number), number);
}

template <class Transaction>
bool waiting_number(Transaction& t1, const locked_instance<Transaction>& locked, std::int64_t number) {
    if (std::ranges::any_of(locked.unstored, [&](const unstored_row& u) { return !u.settled && u.row.number == number; })) return true;
    const auto rows = t1.waiting_numbered(locked.row.id, number, 1);
    return !rows.empty() && rows.front().number == number;
}

/// Why `number` is a duplicate (released, below the first, or WAITING already), or nullptr. A
/// context that starts at the first number it sees records that start here.
template <class Transaction>
const char* number_duplicate(Transaction& t1, locked_instance<Transaction>& locked, const numbering_rules& rules, std::int64_t number) {
    const std::optional<std::int64_t> expected = expected_number(t1, locked, rules);
    if (!expected) {
        t1.skip_numbers(locked.row.id, number - 1);
        locked.last_number = number - 1;
        locked.started_here = true;
        return nullptr;
    }
    if (number < *expected) return locked.last_number ? "its number was released or given up already" : "its number is below the sequence's first number";
    if (number > *expected && waiting_number(t1, locked, number)) return "its number is WAITING already";
    return nullptr;
}

/// Whether `number` (not a duplicate) must wait for the numbers before it.
template <class Transaction>
bool waits_for_number(Transaction& t1, locked_instance<Transaction>& locked, const numbering_rules& rules, std::int64_t number) {
    return number > expected_number(t1, locked, rules).value_or(number);
}

/// The WAITING rows numbered `from` or more: stored ones (at most `limit`) and the batch's
/// unstored ones, by number then arrival.
template <class Transaction>
std::vector<message_record> numbered_from(Transaction& t1, const locked_instance<Transaction>& locked, std::int64_t from, std::size_t limit) {
    std::vector<message_record> rows = t1.waiting_numbered(locked.row.id, from, limit);
    const std::size_t stored = rows.size();
    for (const auto& u : locked.unstored)
        if (!u.settled && u.row.number && *u.row.number >= from) rows.push_back(u.row);
    if (stored == limit && stored > 0) {  // unstored rows past the page could jump stored numbers not read
        const std::int64_t last_read = *rows[stored - 1].number;
        std::erase_if(rows, [&](const message_record& r) { return r.id == 0 && *r.number > last_read; });
    }
    std::ranges::stable_sort(rows, {}, [](const message_record& r) { return *r.number; });
    return rows;
}

}  // namespace seqinbox::detail
