#pragma once
// Databases from before the claim table may hold several WAITING rows of one claim key. A release
// pass replays the oldest of them once and gives the others ("twins") the same final state, so
// the listener never runs twice for one logical message.
#include <set>
#include <utility>
#include <vector>

#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

class twin_rows {
public:
    /// True when `row` is the first of its key in this pass; otherwise remembers it as a twin.
    bool admit(const message_record& row) {
        if (keys_.insert(row.key()).second) return true;
        twins_.emplace_back(row.key(), row.id);
        return false;
    }

    /// The twins of `key`, to be given the state of the replayed row.
    std::vector<message_id> of(const claim_key& key) const {
        std::vector<message_id> ids;
        for (const auto& [twin_key, id] : twins_)
            if (twin_key == key) ids.push_back(id);
        return ids;
    }

private:
    std::set<claim_key> keys_;
    std::vector<std::pair<claim_key, message_id>> twins_;
};

}  // namespace seqinbox::detail
