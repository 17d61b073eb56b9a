// The in-memory store's read views (seqinbox::view_store) and the inspection of committed state
// that tests, the demo and operators use.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "store_internals.hpp"

namespace seqinbox::memory {

std::vector<instance_count> store::instance_counts() const {
    std::lock_guard lock(mutex_);
    std::map<std::pair<std::string, instance_state>, std::size_t> counts;
    for (const auto& [id, row] : instances_) ++counts[{row.row.sequence, row.row.state}];
    std::vector<instance_count> out;
    for (const auto& [key, n] : counts) out.push_back({key.first, key.second, n});
    return out;
}

std::vector<message_count> store::message_counts() const {
    std::lock_guard lock(mutex_);
    std::map<std::pair<std::string, message_state>, std::size_t> counts;
    for (const auto& row : messages_)
        if (row.exists) ++counts[{row.type, row.state}];
    std::vector<message_count> out;
    for (const auto& [key, n] : counts) out.push_back({key.first, key.second, n});
    return out;
}

std::vector<retention_count> store::retention_counts(timestamp now, double share) const {
    std::lock_guard lock(mutex_);
    std::map<std::string, retention_count> counts;
    for (const auto& [id, row] : instances_) {
        if (row.row.state != instance_state::open) continue;
        auto& c = counts.try_emplace(row.row.sequence, retention_count{row.row.sequence}).first->second;
        if (row.row.retain_until < now) ++c.expired;
        else if (used_share(row.row, now) >= share) ++c.expiring;
    }
    std::vector<retention_count> out;
    for (auto& [name, c] : counts) out.push_back(std::move(c));
    return out;
}

template <class Pick>
std::vector<sequence_instance> store::by_retention(std::size_t limit, const scan_position& after, Pick pick) const {
    std::lock_guard lock(mutex_);
    const bool from_start = after == scan_position{};
    auto later = [&](const instance_row& r) { return from_start || std::pair(r.row.retain_until, r.row.id) > std::pair(after.key, after.id); };
    return rows_of(instances_where_locked(limit, [&](const instance_row& r) { return r.row.state == instance_state::open && later(r) && pick(r); },
                                          [](const instance_row& r) { return r.row.retain_until; }));
}

std::vector<sequence_instance> store::expired_instances(timestamp now, std::size_t limit, const scan_position& after) const {
    return by_retention(limit, after, [&](const instance_row& r) { return r.row.retain_until < now; });
}

std::vector<sequence_instance> store::expiring_instances(timestamp now, double share, std::size_t limit, const scan_position& after) const {
    return by_retention(limit, after, [&](const instance_row& r) { return now <= r.row.retain_until && used_share(r.row, now) >= share; });
}

std::vector<waiting_instance> store::waiting_longest(std::size_t limit) const {
    std::lock_guard lock(mutex_);
    std::vector<waiting_instance> found;
    for (const auto& [id, row] : instances_) {
        waiting_instance w{row.row, timestamp::max(), 0};
        for (message_id m : row.messages)
            if (const auto* message = committed_message(m); message != nullptr && message->state == message_state::waiting) {
                ++w.waiting;
                w.oldest_waiting_since = std::min(w.oldest_waiting_since, message->created_at);
            }
        if (w.waiting > 0) found.push_back(std::move(w));
    }
    std::ranges::sort(found, {}, [](const waiting_instance& w) { return std::pair(w.oldest_waiting_since, w.instance.id); });
    if (found.size() > limit) found.resize(limit);
    return found;
}

std::optional<instance_view> store::view_instance(const std::string& sequence, const std::string& context_id,
                                                 const message_page& page) const {
    std::lock_guard lock(mutex_);
    const auto* row = find_instance_row(sequence, context_id);
    if (row == nullptr) return std::nullopt;
    return view_of(*row, page);
}

std::optional<instance_view> store::view_instance(instance_id id, const message_page& page) const {
    std::lock_guard lock(mutex_);
    auto it = instances_.find(id);
    if (it == instances_.end()) return std::nullopt;
    return view_of(it->second, page);
}

std::optional<instance_view> store::view_of(const instance_row& row, const message_page& page) const {
    check_page(page);
    instance_view view{row.row, {}, {}, std::nullopt, {}};
    auto ids = page_ids(row, page, view.counts);
    if (ids.size() > page.limit) {
        ids.pop_back();
        view.next = ids.back();
    }
    if (auto it = instance_actions_.find(row.row.id); it != instance_actions_.end()) view.actions.on_instance = it->second;
    for (message_id m : ids) {
        view.messages.push_back(committed_message(m)->record(m));
        view.messages.back().payload.reset();
        if (auto it = message_actions_.find(m); it != message_actions_.end()) view.actions.on_messages.push_back(it->second);
    }
    view.numbering = progress_of(row);
    return view;
}

numbered_progress store::progress_of(const instance_row& row) {
    numbered_progress progress;
    progress.last_released = row.skipped_through;
    if (!row.processed_numbers.empty())
        progress.last_released = std::max(progress.last_released.value_or(row.processed_numbers.rbegin()->first), row.processed_numbers.rbegin()->first);
    for (const auto& [number, id] : row.waiting_numbers) {
        if (progress.waiting.size() >= max_waiting_numbers_shown) break;
        if (progress.waiting.empty() || progress.waiting.back() != number) progress.waiting.push_back(number);
    }
    return progress;
}

std::vector<message_id> store::page_ids(const instance_row& row, const message_page& page, message_state_counts& counts) const {
    // row.messages is in commit order, not id order: keep the smallest ids in a heap of the
    // page's size rather than sort them all.
    std::priority_queue<message_id> smallest;
    for (message_id m : row.messages) {
        const auto* message = committed_message(m);
        if (message == nullptr) continue;
        ++counts[message->state];
        if (m <= page.after) continue;
        if (smallest.size() <= page.limit) smallest.push(m);
        else if (m < smallest.top()) {
            smallest.pop();
            smallest.push(m);
        }
    }
    std::vector<message_id> ids(smallest.size());
    for (auto it = ids.rbegin(); it != ids.rend(); ++it, smallest.pop()) *it = smallest.top();
    return ids;
}

std::optional<message_view> store::find_message(message_id id) const {
    std::lock_guard lock(mutex_);
    return view_of(id);
}

std::optional<message_view> store::find_message(const claim_key& key) const {
    std::lock_guard lock(mutex_);
    message_id newest = 0;
    for_each_committed(key, [&](message_id id, const detail::stored_message&) { newest = std::max(newest, id); });
    return view_of(newest);
}

std::optional<message_view> store::view_of(message_id id) const {
    const auto* row = committed_message(id);
    if (row == nullptr) return std::nullopt;
    message_view view{row->record(id), instances_.at(row->instance).row, std::nullopt};
    view.message.payload.reset();
    if (auto it = message_actions_.find(id); it != message_actions_.end()) view.pending = it->second;
    return view;
}

double store::used_share(const sequence_instance& i, timestamp now) {
    const auto whole = std::chrono::duration<double>(i.retain_until - i.created_at).count();
    return whole > 0 ? std::chrono::duration<double>(now - i.created_at).count() / whole : 1.0;
}

std::vector<sequence_instance> store::rows_of(const std::vector<instance_id>& ids) const {
    std::vector<sequence_instance> rows;
    for (instance_id id : ids) rows.push_back(instances_.at(id).row);
    return rows;
}

std::vector<sequence_instance> store::instances() const {
    std::lock_guard lock(mutex_);
    std::vector<sequence_instance> rows;
    for (const auto& [id, row] : instances_) rows.push_back(row.row);
    std::ranges::sort(rows, {}, &sequence_instance::id);
    return rows;
}

std::optional<sequence_instance> store::find_instance(const std::string& sequence, const std::string& context_id) const {
    std::lock_guard lock(mutex_);
    const auto* row = find_instance_row(sequence, context_id);
    if (row == nullptr) return std::nullopt;
    return row->row;
}

std::vector<message_record> store::messages() const {
    std::lock_guard lock(mutex_);
    std::vector<message_record> rows;
    for (std::size_t i = 0; i < messages_.size(); ++i)
        if (messages_[i].exists) rows.push_back(messages_[i].record(static_cast<message_id>(i + 1)));
    std::ranges::sort(rows, {}, &message_record::id);
    return rows;
}

std::vector<message_record> store::messages_with_key(const claim_key& key) const {
    std::lock_guard lock(mutex_);
    std::vector<message_record> rows;
    for_each_committed(key, [&](message_id id, const detail::stored_message& row) { rows.push_back(row.record(id)); });
    std::ranges::sort(rows, {}, &message_record::id);
    return rows;
}


std::size_t store::claim_count() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(std::ranges::count_if(claims_, [](const auto& c) { return c.second.committed.has_value(); }));
}

std::size_t store::open_transaction_count() const {
    std::lock_guard lock(mutex_);
    return open_.size();
}

}  // namespace seqinbox::memory
