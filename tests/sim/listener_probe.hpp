#pragma once
// Watches every listener invocation as it happens and checks the promises about listeners:
//  - at most one invocation in flight per claim key and per context;
//  - a listener starts only when its type's release condition holds against the types whose
//    listeners already succeeded in the same context;
// and counts successes per claim key for the end-of-run check. A listener that an action runner
// starts follows what the runner read (docs/operations.md, operator actions): CONSUME and
// CONSUME_ALL replay whatever the condition, EXPIRE and CLOSE replay nothing, the release pass
// after them keeps the order; a type an operator expired counts as done for the order.
// Listeners run on driven tasks, one thread at a time, so the probe needs no lock of its own beyond the step hand-over.
//
// An invocation is "orphaned" when its task's connection dies while it runs: the claim and the
// instance lock are gone, so a duplicate may legitimately take over while it still runs (the
// documented at-least-once window). Orphans are left out of the overlap checks, and their claim
// key is marked as having had the window.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "numbered_checks.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/problems.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/model.hpp"
#include "support/world.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

/// What an action runner read of one instance's pending actions, its messages by claim key.
struct actions_read {
    std::optional<instance_action> on_instance;
    std::map<claim_key, message_action> on_messages;

    /// What the job does to the message: its own action (also beside a CLOSE, which runs after
    /// it), else under CONSUME_ALL a CONSUME.
    std::optional<message_action> executed_on(const claim_key& key) const {
        if (auto it = on_messages.find(key); it != on_messages.end()) return it->second;
        if (on_instance == instance_action::consume_all) return message_action::consume;
        return std::nullopt;
    }
};
using actions_by_context = std::map<std::string, actions_read>;

class listener_probe {
public:
    struct invocation {
        std::size_t consumer;
        claim_key key;
        std::string context;
        bool orphan = false;
        bool operator_replay = false;  ///< started by an operator's CONSUME or CONSUME_ALL
    };

    listener_probe(const declarations<testing::message>& decls, violation_log& log) : log_(&log) {
        for (const auto& m : decls.sequences.front().messages) release_.emplace(m.qualified_type(), m.release);
    }

    // ---- called by the listeners, on their tasks ----

    void enter(std::size_t consumer, const claim_key& key, const std::string& context) {
        ++entered_[key];
        if (disconnected_.contains(consumer)) return enter_disconnected(consumer, key, context);
        for (const auto& other : in_flight_) {
            if (other.orphan) continue;
            if (other.key == key)
                log_->add("listener_overlap_key", "listener of " + text(key) + " started on c" + std::to_string(consumer) +
                                                      " while c" + std::to_string(other.consumer) + " still runs it");
            else if (other.context == context)
                log_->add("listener_overlap_context", "listener of " + text(key) + " started in " + context + " on c" +
                                                          std::to_string(consumer) + " while " + text(other.key) +
                                                          " runs on c" + std::to_string(other.consumer));
        }
        const bool replay = check_operator_replay(consumer, key, context);
        in_flight_.push_back({consumer, key, context, false, replay});
    }

    /// True when the controller armed a failure for this consumer's listener (consumed).
    bool take_failure(std::size_t consumer) { return armed_.erase(consumer) > 0; }

    void leave(std::size_t consumer, bool succeeded) {
        auto it = std::ranges::find(in_flight_, consumer, &invocation::consumer);
        if (it == in_flight_.end()) return;
        if (succeeded) {
            ++successes_[it->key];
            succeeded_once_.insert(it->key);
            succeeded_types_[it->context].insert(it->key.type);
            completed_[consumer].push_back(it->key);
            if (numbers_) numbers_->succeeded(it->key, it->operator_replay);
        }
        in_flight_.erase(it);
    }

    /// The consumer's worker starts deciding a new delivery.
    void begin_delivery(std::size_t consumer) {
        completed_[consumer].clear();
        disconnected_.erase(consumer);
        gap_skips_.erase(consumer);
    }

    /// Action runner `runner` starts the gap-timeout job: no action read applies to it.
    void begin_gap_run(std::size_t runner) {
        begin_delivery(runner);
        read_by_runner_.erase(runner);
    }
    /// The gap job on `runner` skipped the context's timed-out gap (uncommitted): its release
    /// pass may jump it.
    void allow_gap(std::size_t runner, const std::string& context) { gap_skips_[runner].insert(context); }
    /// Numbered seeds: the workload's numbers and the committed progress of a context.
    void watch_numbers(numbered_watch& numbers, last_released_fn last_released) {
        numbers_ = &numbers;
        last_released_ = std::move(last_released);
    }

    // ---- called by the controller ----

    void arm_failure(std::size_t consumer) { armed_.insert(consumer); }
    bool armed(std::size_t consumer) const { return armed_.contains(consumer); }
    bool inside_listener(std::size_t consumer) const { return running(consumer) != nullptr; }
    /// The invocation the consumer's task is inside, if any.
    const invocation* running(std::size_t consumer) const {
        auto it = std::ranges::find(in_flight_, consumer, &invocation::consumer);
        return it == in_flight_.end() ? nullptr : &*it;
    }

    /// The consumer's connection died: its running invocation becomes an orphan, and every key it
    /// handled in this delivery whose state `is_durable` does not report is in the window.
    template <class IsDurable>
    std::size_t connection_lost(std::size_t consumer, IsDurable is_durable) {
        std::size_t opened = 0;
        disconnected_.insert(consumer);
        for (auto& call : in_flight_)
            if (call.consumer == consumer && !call.orphan) {
                call.orphan = true;
                opened += open_window(call.key);
            }
        for (const auto& key : completed_[consumer])
            if (!is_durable(key)) opened += open_window(key);
        return opened;
    }

    /// The consumer's transaction will not commit (the server refused it, SQLSTATE 53200):
    /// every key its listeners completed in this delivery whose state `is_durable` does not
    /// report runs again. The transaction itself lives on until it rolls back: nothing is orphaned.
    template <class IsDurable>
    std::size_t rolled_back(std::size_t consumer, IsDurable is_durable) {
        std::size_t opened = 0;
        for (const auto& key : completed_[consumer])
            if (!is_durable(key)) opened += open_window(key);
        return opened;
    }

    /// The database crashed: every key whose listener succeeded but whose state `is_durable`
    /// does not report (lost with the unflushed commits, or never stored) is in the window.
    template <class IsDurable>
    std::size_t crash(IsDurable is_durable) {
        std::size_t opened = 0;
        for (const auto& [key, n] : successes_)
            if (n > 0 && !is_durable(key)) opened += open_window(key);
        return opened;
    }

    /// Action runner `runner` read the pending actions of the instance it locked just now.
    void actions_read_by(std::size_t runner, actions_by_context read) {
        for (const auto& [context, actions] : read) {
            if (actions.on_instance == instance_action::close) close_targets_.insert(context);
            for (const auto& [key, action] : actions.on_messages)
                if (actions.executed_on(key) == message_action::expire) expire_targets_[context].insert(key);
                else if (action == message_action::consume) consume_targets_.insert(key);
        }
        read_by_runner_[runner] = std::move(read);
    }
    /// How the probe asks whether a key's committed row is PROCESSED (an expiry took effect).
    void ask_processed(std::function<bool(const claim_key&)> is_processed) { is_processed_ = std::move(is_processed); }

    /// Housekeeping removed the context's instance with the rows of `keys`: a later delivery
    /// starts a new instance, in which nothing succeeded yet (the retention boundary).
    void instance_removed(const std::string& context, const std::vector<claim_key>& keys) {
        succeeded_types_.erase(context);
        if (numbers_) numbers_->instance_removed(context);
        consumed_.erase(context);
        expire_targets_.erase(context);
        close_targets_.erase(context);
        for (const auto& key : keys) successes_.erase(key);
    }

    /// Listener successes since the key's instance was last removed.
    std::size_t successes(const claim_key& key) const {
        auto it = successes_.find(key);
        return it == successes_.end() ? 0 : it->second;
    }
    bool had_window(const claim_key& key) const { return windows_.contains(key); }
    /// Invocations of the key's listener so far, whatever became of them (the last one's number).
    std::size_t entered(const claim_key& key) const {
        auto it = entered_.find(key);
        return it == entered_.end() ? 0 : it->second;
    }
    bool ever_succeeded(const claim_key& key) const { return succeeded_once_.contains(key); }
    /// Every key an action runner read EXPIRE for, in the contexts' current instances.
    std::set<claim_key> expire_targets() const {
        std::set<claim_key> all;
        for (const auto& [context, keys] : expire_targets_) all.insert(keys.begin(), keys.end());
        return all;
    }
    /// An action runner read EXPIRE for the key in its current instance.
    bool expire_target(const claim_key& key) const {
        return std::ranges::any_of(expire_targets_, [&](const auto& targets) { return targets.second.contains(key); });
    }
    /// An action runner read an action for the context's current instance other than SKIP_GAP
    /// and CONSUME_ALL, which keep the numbers' order.
    bool operator_touched(const std::string& context) const {
        return close_targets_.contains(context) || expire_targets_.contains(context) || consumed_.contains(context);
    }
    /// An action runner read a CONSUME of the key's own (whatever became of its instance).
    bool consume_target(const claim_key& key) const { return consume_targets_.contains(key); }
    /// An action runner read CLOSE for the context's current instance.
    bool close_target(const std::string& context) const { return close_targets_.contains(context); }
    /// Listeners an operator's CONSUME or CONSUME_ALL started out of the release order.
    std::size_t operator_replays() const noexcept { return operator_replays_; }
    std::size_t in_flight() const noexcept { return in_flight_.size(); }

    static std::string text(const claim_key& key) { return key.type + "/" + key.idempotence_id; }

private:
    std::size_t open_window(const claim_key& key) { return windows_.insert(key).second ? 1 : 0; }

    /// A listener started by a delivery whose connection already died: it holds neither the
    /// claim nor the instance lock, so it is reported on its own, and the overlaps and repeats
    /// it causes are attributed to it rather than reported again.
    void enter_disconnected(std::size_t consumer, const claim_key& key, const std::string& context) {
        log_->add("listener_after_lost_connection", "listener of " + text(key) + " in " + context + " started on c" +
                                                        std::to_string(consumer) + " after its connection was lost");
        check_order(key, context);
        open_window(key);
        in_flight_.push_back({consumer, key, context, true});
    }

    /// A listener on an action runner: CONSUME replays whatever the condition, EXPIRE and CLOSE
    /// replay nothing (a CLOSE only the messages it was requested with do not name); anything
    /// else on it is the release pass that follows, in order.
    bool check_operator_replay(std::size_t consumer, const claim_key& key, const std::string& context) {
        const actions_read* read = read_of(consumer, context);
        const auto action = read ? read->executed_on(key) : std::nullopt;
        if (read && read->on_instance == instance_action::close && action != message_action::consume)
            log_->add("listener_despite_close", "listener of " + text(key) + " in " + context + " started by the CLOSE action on c" +
                                                    std::to_string(consumer));
        else if (action == message_action::expire)
            log_->add("listener_of_expired", "listener of " + text(key) + " in " + context + " started by its EXPIRE action on c" +
                                                 std::to_string(consumer));
        else if (action == message_action::consume)
            return operator_replay(context, read);
        else {
            check_order(key, context, read);
            check_number(consumer, key, context, read);
        }
        return false;
    }

    bool operator_replay(const std::string& context, const actions_read* read) {
        ++operator_replays_;
        if (read->on_instance != instance_action::consume_all) consumed_.insert(context);
        return true;
    }

    /// The number after the highest committed one or completed in this delivery; a runner's
    /// release pass after actions (a skip, an expiry not committed yet) or a gap job's skip may jump.
    void check_number(std::size_t consumer, const claim_key& key, const std::string& context, const actions_read* read) {
        if (!numbers_ || !numbers_->number(key)) return;
        std::optional<std::int64_t> floor = last_released_(context);
        for (const auto& done : completed_[consumer])
            if (const auto n = numbers_->number(done); n && numbers_->context(done) == context) floor = std::max(floor.value_or(*n), *n);
        const bool may_jump = read != nullptr || gap_skips_[consumer].contains(context);
        numbers_->check_start(key, floor, may_jump, had_window(key), *log_);
    }

    const actions_read* read_of(std::size_t runner, const std::string& context) const {
        auto by_runner = read_by_runner_.find(runner);
        if (by_runner == read_by_runner_.end()) return nullptr;
        auto it = by_runner->second.find(context);
        return it == by_runner->second.end() ? nullptr : &it->second;
    }

    /// The types whose listeners succeeded in the context, and those an operator expired there:
    /// committed, or expired by the runner asking (`read`), whose release pass follows its
    /// actions in the same transaction (under `required` the expiry is not committed yet).
    std::set<std::string> done_types(const std::string& context, const actions_read* read) {
        std::set<std::string> done = succeeded_types_[context];
        for (const auto& key : expire_targets_[context])
            if ((is_processed_ && is_processed_(key)) || (read && read->executed_on(key) == message_action::expire)) done.insert(key.type);
        return done;
    }

    void check_order(const claim_key& key, const std::string& context, const actions_read* read = nullptr) {
        const auto done = done_types(context, read);
        const condition& release = release_.at(key.type);
        if (release.satisfied([&](const std::string& t) { return done.contains(t); })) return;
        std::string before;
        for (const auto& t : done) before += (before.empty() ? "" : ",") + t;
        log_->add("listener_out_of_order", "listener of " + text(key) + " in " + context + " started before '" +
                                               describe(release) + "' held (succeeded: " +
                                               (before.empty() ? "none" : before) + ")");
    }

    violation_log* log_;
    std::map<std::string, condition> release_;
    std::vector<invocation> in_flight_;
    std::set<std::size_t> armed_;
    std::map<claim_key, std::size_t> successes_;
    std::map<claim_key, std::size_t> entered_;
    std::map<std::string, std::set<std::string>> succeeded_types_;  // by context
    std::map<std::size_t, std::vector<claim_key>> completed_;       // by consumer, this delivery
    std::set<claim_key> windows_;
    std::set<std::size_t> disconnected_;  // consumers whose connection died in this delivery
    std::set<claim_key> succeeded_once_;  // whatever removals followed
    std::map<std::size_t, actions_by_context> read_by_runner_;       // each runner's last read
    std::map<std::string, std::set<claim_key>> expire_targets_;      // by context: read as EXPIRE
    std::set<std::string> close_targets_;                            // contexts read with CLOSE
    std::function<bool(const claim_key&)> is_processed_;
    numbered_watch* numbers_ = nullptr;
    last_released_fn last_released_;
    std::map<std::size_t, std::set<std::string>> gap_skips_;  // by gap runner: contexts it skipped a gap of
    std::set<claim_key> consume_targets_;                      // keys read with a CONSUME of their own
    std::set<std::string> consumed_;                           // contexts with a message CONSUME read
    std::size_t operator_replays_ = 0;
};

}  // namespace seqinbox::sim
