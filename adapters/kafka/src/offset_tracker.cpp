#include "offset_tracker.hpp"

#include <algorithm>

namespace seqinbox::kafka::detail {

void offset_tracker::polled(const partition_id& where, std::int64_t offset) {
    auto& state = partitions_[where];
    auto [record, added] = state.polled.emplace(offset, record_state::in_flight);
    if (added || record->second == record_state::given_back) {
        record->second = record_state::in_flight;
        ++state.in_flight;
    }
    // Polled again while another thread still holds it (the consumer sought back before it), or
    // decided already: one entry, whoever decides first.
}

void offset_tracker::decided(const partition_id& where, std::int64_t offset) {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return;  // revoked meanwhile: the new owner decides again
    auto& state = found->second;
    const auto record = state.polled.find(offset);
    if (record == state.polled.end() || record->second == record_state::decided) return;  // decided twice
    if (record->second == record_state::in_flight) --state.in_flight;
    record->second = record_state::decided;  // a copy polled twice may be decided after the other was given back
    advance(state);
}

void offset_tracker::advance(partition_state& state) {
    while (!state.polled.empty() && state.polled.begin()->second == record_state::decided) {
        state.position = std::max(state.position, state.polled.begin()->first + 1);
        state.polled.erase(state.polled.begin());
    }
}

void offset_tracker::given_back(const partition_id& where, std::int64_t offset) {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return;  // revoked meanwhile: the new owner starts before it
    auto& state = found->second;
    const auto record = state.polled.find(offset);
    if (record == state.polled.end() || record->second != record_state::in_flight) return;  // decided, or given back already
    record->second = record_state::given_back;
    --state.in_flight;
}

std::optional<std::int64_t> offset_tracker::seek_target(const partition_id& where) const {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return std::nullopt;
    for (const auto& [offset, state] : found->second.polled)
        if (state == record_state::given_back) return offset;
    return std::nullopt;
}

bool offset_tracker::undecided(const partition_id& where, std::int64_t offset) const {
    const auto found = partitions_.find(where);
    if (found == partitions_.end()) return false;
    const auto record = found->second.polled.find(offset);
    return record != found->second.polled.end() && record->second != record_state::decided;
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
