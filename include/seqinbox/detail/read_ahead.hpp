#pragma once
// A batch reads the WAITING rows its release passes may reach once, for every instance it locked,
// right after its claims: a release pass then finds them here instead of asking the store (one
// round trip per batch instead of one per release). Read under the instance lock, they stay
// complete while the batch holds it; rows it replays leave.
#include <algorithm>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

class read_ahead_rows {
public:
    /// True when every WAITING row of `types` was read ahead.
    bool covers(std::span<const std::string> types) const {
        return std::ranges::all_of(types, [&](const std::string& t) { return has_type(t); });
    }

    bool has_type(const std::string& type) const { return std::ranges::find(types_, type) != types_.end(); }

    /// The rows of `types` still waiting, oldest first (as the store's waiting_messages answers).
    std::vector<message_record> of(std::span<const std::string> types) const {
        std::vector<message_record> rows;
        std::ranges::copy_if(rows_, std::back_inserter(rows),
                             [&](const message_record& r) { return std::ranges::find(types, r.type) != types.end(); });
        return rows;
    }

    /// Every WAITING row of `types`, read under the instance lock.
    void add(std::vector<std::string> types, std::vector<message_record> rows) {
        std::ranges::move(types, std::back_inserter(types_));
        std::ranges::move(rows, std::back_inserter(rows_));
        std::ranges::sort(rows_, {}, &message_record::id);
    }

    /// The key's rows were replayed (each with its twins): none of them waits any longer.
    void settle(const claim_key& key) {
        std::erase_if(rows_, [&](const message_record& r) { return r.key() == key; });
    }

private:
    std::vector<std::string> types_;
    std::vector<message_record> rows_;
};

}  // namespace seqinbox::detail
