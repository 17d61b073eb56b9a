#pragma once
// basic_inbox's operator actions (run_pending_actions, docs/operations.md): the pending requests
// of one instance run in one transaction under its lock, then a release pass where due.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "seqinbox/detail/replay_order.hpp"
#include "seqinbox/inbox.hpp"

namespace seqinbox {

template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::run_pending_actions(std::size_t page_size, std::size_t pages)
    requires action_store<Store>
{
    ensure_ready();
    std::size_t executed = 0;
    for (std::size_t page = 0; page < pages; ++page) {
        const auto ids = store_->instances_with_pending_actions(page_size);
        if (ids.empty()) break;
        for (instance_id id : ids) executed += act_on(id);
    }
    return executed;
}

template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::act_on(instance_id id) {
    const auto started = std::chrono::steady_clock::now();
    const std::size_t executed = act_on_locked(id);
    if constexpr (requires(std::chrono::nanoseconds d) { metrics_.action_executed(d); })
        if (executed > 0) metrics_.action_executed(std::chrono::steady_clock::now() - started);
    return executed;
}

/// The claims an action on a FAILED message needs (its claim was deleted when it failed).
template <class Store, class Source, class ErrorSink, class Policies>
struct basic_inbox<Store, Source, ErrorSink, Policies>::failed_claims {
    std::set<claim_key> attempted;
    std::set<claim_key> won;
};

template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::act_on_locked(instance_id id) {
    transaction t1 = store_->begin();
    locked_instance locked;
    failed_claims claims;
    try {
        claims = claim_failed_targets(t1, id);
        locked = lock(t1, id);
    } catch (const error& e) {
        if (e.category() != error_category::retryable) throw;
        return 0;  // removed meanwhile, and its actions with it
    }
    pending_actions actions = t1.pending_actions(id);
    scope s{t1};
    const actions_run run = execute(s, locked, actions, claims);
    t1.clear_actions(id, actions);  // only these: a message request made meanwhile runs next time
    if (!run.heal) {
        t1.commit();
    } else if (claims.won.empty()) {
        heal(s, locked.row, *run.types);  // relocks: what the actions unblocked; closing
        t1.commit();
    } else {
        // A FAILED message's new state commits with its claim; it must be durable before a
        // successor's listener runs, so the release pass waits for that commit.
        t1.commit();
        heal_afresh(locked.row, *run.types);
    }
    return run.executed;
}

template <class Store, class Source, class ErrorSink, class Policies>
struct basic_inbox<Store, Source, ErrorSink, Policies>::actions_run {
    std::size_t executed = 0;
    bool heal = false;  ///< a release pass is due (an OPEN instance not closed by a CLOSE)
    const std::vector<std::string>* types = nullptr;  ///< of the instance's sequence
};

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::heal(scope& s, const sequence_instance& instance,
                                                           const std::vector<std::string>& types) {
    delivery_result result{outcome::processed, {}, {}, instance.context_id, 0, 0};
    heal(s, instance.id, instance.context_id, types, result);
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::heal_afresh(const sequence_instance& instance,
                                                                  const std::vector<std::string>& types) {
    transaction t2 = store_->begin();
    scope s{t2};
    try {
        heal(s, instance, types);
    } catch (const error& e) {
        if (e.category() != error_category::retryable) throw;
        return;  // removed meanwhile
    }
    t2.commit();
}

/// Claims the keys of the FAILED messages the pending requests name, BEFORE the instance lock,
/// as a delivery does: a resend holding an uncommitted claim of such a key waits for the
/// instance lock, so claiming under it could deadlock. All at once where the claim strategy
/// claims batches (claims in key order, then the lock); else one per run.
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::claim_failed_targets(transaction& t1, instance_id id) -> failed_claims {
    std::vector<message_id> ids;
    for (const auto& request : t1.pending_actions(id).on_messages) ids.push_back(request.message);
    std::vector<claim_request> requests;
    if (!ids.empty())
        for (const auto& row : t1.action_targets(id, ids))
            if (row.state == message_state::failed) requests.push_back({row.key(), id, clock_.now()});
    if constexpr (!batch_claim_policy<Claim, transaction>)
        if (requests.size() > 1) requests.resize(1);
    std::ranges::sort(requests, {}, &claim_request::key);
    failed_claims claims;
    if (requests.empty()) return claims;
    std::vector<claim_result> results;
    if constexpr (batch_claim_policy<Claim, transaction>) results = Claim::acquire_batch(t1, std::span<const claim_request>(requests));
    else results.push_back(Claim::acquire(t1, requests.front()));
    for (std::size_t i = 0; i < requests.size(); ++i) {
        claims.attempted.insert(requests[i].key);
        if (results[i].won) claims.won.insert(requests[i].key);
    }
    return claims;
}

/// Runs the requests read: how many ran, and whether a release pass is due. Message actions
/// run whatever the instance's state, before a CLOSE requested with them; only an OPEN
/// instance is healed or closed. A
/// request on a FAILED message whose key was not claimed before the lock (it failed since)
/// is taken out of `actions`, so that it stays pending for the next run.
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::execute(scope& s, const locked_instance& locked, pending_actions& actions,
                                                              const failed_claims& claims) -> actions_run {
    const sequence_instance& instance = locked.row;
    const auto* types = catalog_.types_of_sequence(instance.sequence);
    if (types == nullptr) {
        log(log_level::warn, [&] {
            return "pending actions on instance " + std::to_string(instance.id) + " of undeclared sequence " + detail::loggable(instance.sequence);
        });
        return {};
    }
    const auto requested = [&](instance_action a) { return actions.on_instance && actions.on_instance->action == a; };
    const bool open = instance.state == instance_state::open;
    const bool consume_all = requested(instance_action::consume_all);
    const bool closing = requested(instance_action::close) && open;
    const bool skipping = requested(instance_action::skip_gap) && open;
    std::size_t executed = consume_all || closing || skipping ? 1 : 0;
    if (skipping) skip_gap(s.t1, instance);
    std::set<message_id> postponed;
    for (const auto& row : action_rows(s.t1, locked, actions, consume_all)) {
        const auto own = own_request(row.id, actions);
        const bool failed = row.state == message_state::failed;
        if (failed && !claims.attempted.contains(row.key())) {
            postponed.insert(row.id);
            continue;
        }
        if (failed && !claims.won.contains(row.key())) {
            log(log_level::info, [&] {
                return "operator action on FAILED " + detail::loggable_message(row.type, row.idempotence_id) +
                       " left to a redelivery that claimed it meanwhile";
            });
            continue;
        }
        run_action(s, row, own.value_or(message_action::consume), instance.context_id);
        if (own) ++executed;
    }
    std::erase_if(actions.on_messages, [&](const message_request& r) { return postponed.contains(r.message); });
    if (closing) close(s.t1, instance.id, instance.context_id);
    return {executed, open && !closing, types};
}

/// The rows the actions run on, in the conditions' order: those of message requests still
/// WAITING or FAILED with a record, and under CONSUME_ALL every WAITING row.
template <class Store, class Source, class ErrorSink, class Policies>
std::vector<message_record> basic_inbox<Store, Source, ErrorSink, Policies>::action_rows(transaction& t1, const locked_instance& locked,
                                                                                         const pending_actions& actions, bool consume_all) {
    std::vector<message_id> ids;
    for (const auto& request : actions.on_messages) ids.push_back(request.message);
    std::vector<message_record> rows = t1.action_targets(locked.row.id, ids);
    if (consume_all)
        for (auto& row : t1.waiting_messages(locked.row.id, locked.waiting))
            if (!std::ranges::any_of(rows, [&](const message_record& r) { return r.id == row.id; })) rows.push_back(std::move(row));
    if (numbering_of(locked.row.sequence) != nullptr) {  // numbers decide the order
        std::ranges::sort(rows, [](const message_record& a, const message_record& b) {
            return std::pair(a.number.value_or(0), a.id) < std::pair(b.number.value_or(0), b.id);
        });
        return rows;
    }
    return detail::in_replay_order(std::move(rows), [&](const std::string& type) {
        const entry* e = catalog_.find(type);
        return e == nullptr ? nullptr : &e->dependents;
    });
}

/// SKIP_GAP: the numbers missing before the instance's first WAITING one are given up; the
/// release pass after the actions replays what follows. Nothing to skip, or not numbered: logged.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::skip_gap(transaction& t1, const sequence_instance& instance) {
    const numbering_rules* rules = numbering_of(instance.sequence);
    const auto last = rules == nullptr ? std::nullopt : t1.last_released_number(instance.id);
    const std::int64_t from = last ? *last + 1 : std::numeric_limits<std::int64_t>::min();
    const auto first = rules == nullptr ? std::vector<message_record>{} : t1.waiting_numbered(instance.id, from, 1);
    if (first.empty()) {
        log(log_level::warn, [&] {
            return "SKIP_GAP on instance " + std::to_string(instance.id) + ": " +
                   (rules == nullptr ? "its sequence is not numbered" : std::string("no message waits behind a gap"));
        });
        return;
    }
    const std::int64_t through = *first.front().number - 1;
    t1.skip_numbers(instance.id, through);
    log(log_level::warn, [&] {
        return "an operator skipped the numbers up to " + std::to_string(through) + " of instance " + std::to_string(instance.id) +
               " context " + detail::loggable(instance.context_id);
    });
}

template <class Store, class Source, class ErrorSink, class Policies>
std::optional<message_action> basic_inbox<Store, Source, ErrorSink, Policies>::own_request(message_id id, const pending_actions& actions) {
    for (const auto& request : actions.on_messages)
        if (request.message == id) return request.action;
    return std::nullopt;
}

/// One action on a row action_rows read. A FAILED row's key was claimed again before (so that
/// a resend is a duplicate once it ran): its new state commits with that claim, and a replay
/// that fails again deletes the claim.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::run_action(scope& s, const message_record& row, message_action action,
                                                                 const std::string& context_id) {
    const bool failed = row.state == message_state::failed;
    scope here{s.t1, s.batch, failed};
    if (action == message_action::expire) expire(here, row, context_id);
    else if (!replay(here, row, {}, context_id) && failed) forget(here, here.t1, row.key());
}

/// EXPIRE: PROCESSED without replay.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::expire(scope& s, const message_record& row, const std::string& context_id) {
    run_state(s, [&](transaction* tx) { tx->update_message_state(row.id, message_state::processed, clock_.now()); });
    decided(about(decision_kind::expired, row.type, row.idempotence_id, context_id));
}

}  // namespace seqinbox
