#pragma once
// The operator's side of a run (docs/operations.md): which actions may be requested in the current state,
// what an action runner reads of the pending actions, and how housekeeping and time are set up.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "declaration_gen.hpp"
#include "listener_probe.hpp"
#include "run_types.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/actions.hpp"

namespace seqinbox::sim {

/// The housekeepers' removal delay (after retain_until).
inline constexpr std::chrono::hours removal_delay{1};

/// How far pass_time moves the clock: half the retention, or past retention and removal delay.
inline std::chrono::seconds time_span(std::size_t span) {
    return span == 0 ? std::chrono::seconds(sequence_retention) / 2 : std::chrono::seconds(sequence_retention + removal_delay) + std::chrono::seconds(1);
}

/// Housekeeper `runner`: small batches (1, 2) so that a run takes several steps; the manual clock
/// stands still during a run, so max_duration never cuts it.
inline housekeeping_options housekeeping_of(std::size_t runner) {
    housekeeping_options options;
    options.removal_delay = removal_delay;
    options.batch_size = 1 + runner;
    return options;
}

/// Called on the housekeeper's task; the step hand-over orders it before the controller reads.
inline void count_housekeeping(const housekeeping_report& report, tally& counts) {
    counts["housekeeping_closed_removed"] += report.closed_removed;
    counts["housekeeping_marked"] += report.marked;
    counts["housekeeping_expired_removed"] += report.expired_removed;
    counts["housekeeping_forwarded"] += report.forwarded;
    counts["housekeeping_jobs_skipped"] += report.skipped.size();
}

/// Pages of the pending-action job on action runner `runner`: 1 page of 1, 2 pages of 2.
inline std::size_t action_pages_of(std::size_t runner) { return 1 + runner; }

/// One request an operator may make now.
struct action_request {
    std::variant<std::pair<message_id, message_action>, std::pair<instance_id, instance_action>> what;
    std::string target;  ///< the message's key or the instance's context, for traces

    std::string action_name() const {
        return std::visit([](const auto& w) { return std::string(to_string(w.second)); }, what);
    }
    template <class Store>
    bool send(Store& store, timestamp now) const {
        return std::visit(
            [&](const auto& w) {
                if constexpr (std::is_same_v<std::decay_t<decltype(w.second)>, message_action>)
                    return seqinbox::accepted(store.request_message_action(w.first, w.second, now));
                else
                    return seqinbox::accepted(store.request_instance_action(w.first, w.second, now));
            },
            what);
    }
};

/// The instance actions an operator may request on an OPEN instance: SKIP_GAP too when numbered.
inline std::vector<instance_action> instance_actions(bool numbered) {
    if (numbered) return {instance_action::consume_all, instance_action::close, instance_action::skip_gap};
    return {instance_action::consume_all, instance_action::close};
}

/// CONSUME and EXPIRE per committed WAITING message and FAILED one with its record (any
/// instance state), then CONSUME_ALL and CLOSE (and SKIP_GAP if numbered) per OPEN instance.
inline std::vector<action_request> action_requests(const memory::store& store, bool numbered) {
    std::vector<action_request> requests;
    for (const auto& row : store.messages())
        if (row.state == message_state::waiting || (row.state == message_state::failed && row.payload))
            for (auto action : {message_action::consume, message_action::expire})
                requests.push_back({std::pair{row.id, action}, listener_probe::text(row.key())});
    for (const auto& instance : store.instances())
        if (instance.state == instance_state::open)
            for (auto action : instance_actions(numbered))
                requests.push_back({std::pair{instance.id, action}, instance.context_id});
    return requests;
}

/// How many requests action_requests lists now, counted without copying rows.
inline std::size_t action_request_count(const memory::store& store, bool numbered) {
    std::size_t count = 0;
    for (const auto& c : store.message_counts())
        if (c.state == message_state::waiting) count += 2 * c.count;
    for (const auto& c : store.instance_counts())
        if (c.state == instance_state::open) count += instance_actions(numbered).size() * c.count;
    return count;
}

/// The pending actions of the instances `ids`, as an action runner reads them (by context, by key).
inline actions_by_context pending_actions_of(const memory::store& store, const std::vector<instance_id>& ids) {
    actions_by_context read;
    for (const auto& instance : store.instances()) {
        if (std::ranges::find(ids, instance.id) == ids.end()) continue;
        for (message_page page{.limit = max_message_page};;) {  // a view holds a page of the messages: read them all
            const auto view = store.view_instance(instance.sequence, instance.context_id, page);
            if (!view) break;
            if (!view->actions.empty()) {
                actions_read& actions = read[instance.context_id];
                if (view->actions.on_instance) actions.on_instance = view->actions.on_instance->action;
                for (const auto& request : view->actions.on_messages)
                    for (const auto& row : view->messages)
                        if (row.id == request.message) actions.on_messages.emplace(row.key(), request.action);
            }
            if (!view->next) break;
            page.after = *view->next;
        }
    }
    return read;
}

}  // namespace seqinbox::sim
