#include "offset_tracker.hpp"

#include <algorithm>

namespace seqinbox::kafka::detail {

void offset_tracker::polled(const partition_id& where, std::int64_t offset) {
    auto& state = partitions_[where];
    if (state.polled.emplace(offset, false).second) ++state.in_flight;
}

void offset_tracker::decided(const partition_id& where, std::int64_t offset) {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return;  // revoked meanwhile: the new owner decides again
    auto& state = found->second;
    const auto record = state.polled.find(offset);
    if (record == state.polled.end() || record->second) return;  // given back or decided twice
    record->second = true;
    --state.in_flight;
    while (!state.polled.empty() && state.polled.begin()->second) {
        state.position = std::max(state.position, state.polled.begin()->first + 1);
        state.polled.erase(state.polled.begin());
    }
}

void offset_tracker::given_back(const partition_id& where, std::int64_t offset) {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return;
    auto& state = found->second;
    for (auto it = state.polled.lower_bound(offset); it != state.polled.end(); it = state.polled.erase(it))
        if (!it->second) --state.in_flight;
}

std::vector<commit_position> offset_tracker::take_commits(std::size_t cluster, bool all) {
    std::vector<commit_position> result;
    for (auto& [where, state] : partitions_)
        if (where.cluster == cluster && state.assigned && state.position >= 0 && (all || state.position > state.committed)) {
            result.push_back({where, state.position});
            state.committed = state.position;
        }
    return result;
}

void offset_tracker::commit_failed(const commit_position& position) {
    const auto found = partitions_.find(position.where);
    if (found != partitions_.end() && found->second.committed == position.offset) found->second.committed = -1;
}

std::size_t offset_tracker::in_flight_total() const {
    std::size_t count = 0;
    for (const auto& entry : partitions_) count += entry.second.in_flight;
    return count;
}

}  // namespace seqinbox::kafka::detail
