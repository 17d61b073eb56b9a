#pragma once
// What basic_inbox knows of a sequence instance while a transaction holds its row lock (one
// delivery's T1 holds one; a batch, every instance it locked), with the rows a batch buffered.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqinbox/detail/read_ahead.hpp"
#include "seqinbox/detail/release_plan.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

/// A WAITING message a batch buffered and has not stored: a release within the batch stores
/// it once, in its final state (no WAITING row and no read of it); the batch's end stores
/// the rest. Its place in `unstored` is its arrival.
struct unstored_row {
    message_record row;  ///< id 0: not stored
    message_id takes_over = 0;  ///< the key's FAILED row it will be stored in: its place among stored rows
    bool settled = false;
};

/// What the claim transaction knows once it holds the instance row lock. `waiting` (types
/// with stored WAITING rows) stays complete while the lock is held, so the release pass skips
/// types with nothing waiting.
template <class Transaction>
struct locked_instance {
    sequence_instance row;
    processed_set processed;
    std::vector<std::string> waiting;
    std::vector<unstored_row> unstored;  ///< a batch's only
    read_ahead_rows read_ahead;  ///< a batch's only
    std::optional<std::size_t> stored_waiting{};  ///< counted once per lock, again after a release settled a stored row
    std::optional<std::int64_t> last_number{};  ///< numbered sequences: the highest number released, once read
    bool last_number_read = false;
    bool started_here = false;  ///< a first-seen context's start was recorded in this transaction

    bool may_wait(const std::string& type) const { return std::ranges::find(waiting, type) != waiting.end(); }

    /// The WAITING rows of `types`: read ahead by the batch when it read them all, else asked.
    std::vector<message_record> waiting_rows(Transaction& t1, std::span<const std::string> types) const {
        if (read_ahead.covers(types)) return read_ahead.of(types);
        return t1.waiting_messages(row.id, types);
    }

    /// The instance's WAITING messages, stored or this batch's unstored ones: the store counts
    /// (up to `up_to`) only when stored rows may wait, and once until a release settles one.
    std::size_t waiting_count(Transaction& t1, std::size_t up_to) {
        if (!stored_waiting) stored_waiting = waiting.empty() ? 0 : t1.count_waiting(row.id, up_to);
        return *stored_waiting + static_cast<std::size_t>(std::ranges::count_if(unstored, [](const unstored_row& u) { return !u.settled; }));
    }

    /// The unstored rows still waiting whose type `wanted(type)` accepts, into `plan`.
    template <class Wanted>
    void add_unstored(release_plan& plan, Wanted wanted) const {
        for (std::size_t i = 0; i < unstored.size(); ++i)
            if (!unstored[i].settled && wanted(unstored[i].row.type)) {
                if (unstored[i].takes_over != 0) plan.add_in_place_of(unstored[i].row, unstored[i].takes_over);
                else plan.add_unstored(unstored[i].row, i);
            }
    }

    /// The replay of `row` stored its final state: not stored again at the batch's end, not
    /// read ahead any longer.
    void settle(const message_record& row) {
        if (row.id != 0) {
            stored_waiting.reset();
            return read_ahead.settle(row.key());
        }
        for (auto& u : unstored)
            if (u.row.key() == row.key()) u.settled = true;
    }
};

}  // namespace seqinbox::detail
