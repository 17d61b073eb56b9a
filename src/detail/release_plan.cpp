// The bookkeeping of one release pass (see seqinbox/detail/release_plan.hpp).
#include "seqinbox/detail/release_plan.hpp"

#include <algorithm>

namespace seqinbox::detail {

bool processed_set::contains(const std::string& type) const { return std::ranges::find(types_, type) != types_.end(); }

bool processed_set::insert(const std::string& type) {
    if (contains(type)) return false;
    types_.push_back(type);
    return true;
}

bool processed_set::contains_all(const std::vector<std::string>& types) const {
    return std::ranges::all_of(types, [&](const std::string& t) { return contains(t); });
}

bool release_plan::fetched(const std::string& type) const {
    return std::ranges::any_of(fetched_, [&](const std::string* f) { return *f == type; });
}

void release_plan::mark_fetched(const std::string& type) {
    if (!fetched(type)) fetched_.push_back(&type);
}

void release_plan::add(message_record row) {
    const arrival order{false, row.id};
    add_entry(std::move(row), order);
}

void release_plan::add_in_place_of(message_record row, message_id stored) { add_entry(std::move(row), {false, stored}); }

void release_plan::add_unstored(message_record row, std::size_t arrival_number) {
    add_entry(std::move(row), {true, static_cast<std::int64_t>(arrival_number)});
}

void release_plan::add_entry(message_record row, arrival order) {
    entries_.push_back({std::move(row), order, false});
    evaluate(entries_.size() - 1);
}

message_record release_plan::take_next() {
    std::size_t index = ready_.top().second;
    ready_.pop();
    return std::move(entries_[index].row);
}

bool release_plan::mark_processed(const std::string& type) {
    if (!processed_->insert(type)) return false;
    auto it = parked_.find(type);
    if (it == parked_.end()) return true;
    auto indices = std::move(it->second);
    parked_.erase(it);
    for (std::size_t index : indices)
        if (!entries_[index].queued) evaluate(index);
    return true;
}

void release_plan::evaluate(std::size_t index) {
    entry& e = entries_[index];
    const condition& cond = condition_of_(e.row.type);
    if (cond.satisfied(processed_->is_processed())) {
        e.queued = true;
        ready_.emplace(e.order, index);
        return;
    }
    cond.for_each_predecessor([&](const std::string& predecessor) {
        if (!processed_->contains(predecessor)) {
            auto& list = parked_[predecessor];
            if (list.empty() || list.back() != index) list.push_back(index);
        }
    });
}

}  // namespace seqinbox::detail
