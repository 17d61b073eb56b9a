// The in-memory store's operator actions (seqinbox::action_store), committed at once like an UPDATE.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store_internals.hpp"

namespace seqinbox::memory {

namespace {

/// Runs `wait` (a wait for a row lock within the request lock timeout); its lock timeout becomes
/// request_locked(`target`), as the PostgreSQL store reports it.
template <class Wait>
void waiting_for_row(const std::string& target, Wait wait) {
    try {
        wait();
    } catch (const error& e) {
        if (e.sqlstate() == "55P03") throw request_locked(target);
        throw;
    }
}

}  // namespace

request_outcome store::request_message_action(message_id id, message_action action, timestamp now) {
    yield_point("action.request");
    lock_guard lock(mutex_);
    waiting_for_row("message " + std::to_string(id), [&] {
        wait_while(lock, nullptr, "action.request", [&] { return message_locks_.contains(id); }, options_.request_lock_timeout);
    });
    const auto* row = committed_message(id);
    if (row == nullptr) return request_outcome::not_found;
    if (const auto refused = action_refusal(*row)) return *refused;
    message_actions_.insert_or_assign(id, message_request{id, action, now});
    flush_wal();
    return request_outcome::accepted;
}

std::optional<request_outcome> store::action_refusal(const detail::stored_message& row) {
    if (row.state == message_state::processed) return request_outcome::wrong_state;
    if (row.state == message_state::failed && row.payload == nullptr) return request_outcome::no_record;
    return std::nullopt;
}

request_outcome store::request_instance_action(instance_id id, instance_action action, timestamp now) {
    yield_point("action.request");
    lock_guard lock(mutex_);
    waiting_for_row("instance " + std::to_string(id), [&] {
        wait_while(lock, nullptr, "action.request", [&] { return instance_locks_.contains(id); }, options_.request_lock_timeout);
    });
    auto it = instances_.find(id);
    if (it == instances_.end()) return request_outcome::not_found;
    if (it->second.row.state != instance_state::open) return request_outcome::wrong_state;
    instance_actions_.insert_or_assign(id, instance_request{action, now});
    flush_wal();
    return request_outcome::accepted;
}

std::vector<instance_id> store::instances_with_pending_actions(std::size_t limit) const {
    std::lock_guard lock(mutex_);
    std::map<instance_id, timestamp> oldest;  // the oldest request of each instance
    auto note = [&](instance_id id, timestamp at) {
        auto [it, fresh] = oldest.try_emplace(id, at);
        if (!fresh && at < it->second) it->second = at;
    };
    for (const auto& [id, request] : instance_actions_) note(id, request.requested_at);
    for (const auto& [id, request] : message_actions_) note(committed_message(id)->instance, request.requested_at);
    return instances_where_locked(limit, [&](const instance_row& r) { return oldest.contains(r.row.id); },
                                  [&](const instance_row& r) { return oldest.at(r.row.id); });
}

pending_actions store::actions_of(instance_id instance) const {
    seqinbox::pending_actions actions;
    if (auto it = instance_actions_.find(instance); it != instance_actions_.end()) actions.on_instance = it->second;
    for (message_id id : instances_.at(instance).messages)
        if (auto it = message_actions_.find(id); it != message_actions_.end()) actions.on_messages.push_back(it->second);
    return actions;
}

}  // namespace seqinbox::memory
