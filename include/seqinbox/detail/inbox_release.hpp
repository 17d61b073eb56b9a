#pragma once
// basic_inbox's release passes: the WAITING messages a PROCESSED type unblocks are replayed in
// the order their conditions allow, under the instance lock; healing and closing an instance.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <algorithm>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// A duplicate still runs a release pass over every WAITING message of the instance: if a
/// connection died between storing PROCESSED and releasing successors (perhaps successors of
/// a message this one released), or before its WAITING row committed, so that the row was
/// stored outside the instance lock, the redelivery releases them. Locks the instance first.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::heal(scope& s, instance_id instance, const std::string& context_id,
                                                           const std::vector<std::string>& sequence_types, delivery_result& result) {
    transaction& t1 = s.t1;
    locked_instance locked = lock(t1, instance);
    heal_locked(s, locked, context_id, sequence_types, result);
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::heal_locked(scope& s, locked_instance& locked, const std::string& context_id,
                                                                  const std::vector<std::string>& sequence_types, delivery_result& result) {
    transaction& t1 = s.t1;
    release_all_waiting(s, locked, context_id, result);
    if (numbering_of(locked.row.sequence) != nullptr) return;  // numbered: never closed by completion
    if (locked.row.state == instance_state::open && locked.processed.contains_all(sequence_types)) close(t1, locked, context_id);
}

/// A release pass over every WAITING message of the locked instance, whatever made it ready.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::release_all_waiting(scope& s, locked_instance& locked, const std::string& context_id,
                                                                          delivery_result& result) {
    if (const numbering_rules* rules = numbering_of(locked.row.sequence)) return release_numbered(s, locked, *rules, context_id, result);
    transaction& t1 = s.t1;
    const bool unstored = std::ranges::any_of(locked.unstored, [](const unstored_row& u) { return !u.settled; });
    if (locked.waiting.empty() && !unstored) return;
    detail::release_plan plan(condition_lookup(), locked.processed);
    detail::twin_rows twins;
    for (const auto& type : locked.waiting) plan.mark_fetched(type);
    for (const auto& u : locked.unstored) plan.mark_fetched(catalog_.find(u.row.type)->qualified);
    if (!locked.waiting.empty())
        for (auto& row : locked.waiting_rows(t1, locked.waiting))
            if (twins.admit(row)) plan.add(std::move(row));
    locked.add_unstored(plan, [](const std::string&) { return true; });
    run_release(s, context_id, locked, plan, twins, result);
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::release(scope& s, const delivery& d, locked_instance& locked,
                                                              const std::string& type, delivery_result& result) {
    transaction& t1 = s.t1;
    detail::release_plan plan(condition_lookup(), locked.processed);
    detail::twin_rows twins;
    plan.mark_processed(type);
    fetch_dependents(t1, locked, plan, twins, type);
    run_release(s, d.context_id, locked, plan, twins, result);
}

template <class Store, class Source, class ErrorSink, class Policies>
std::function<const condition&(const std::string&)> basic_inbox<Store, Source, ErrorSink, Policies>::condition_lookup() const {
    return [this](const std::string& t) -> const condition& { return catalog_.find(t)->declaration->release; };
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::run_release(scope& s, const std::string& context_id, locked_instance& locked,
                                                                  detail::release_plan& plan, detail::twin_rows& twins,
                                                                  delivery_result& result) {
    transaction& t1 = s.t1;
    while (plan.has_ready()) {
        message_record row = plan.take_next();
        const bool replayed = replay(s, row, twins.of(row.key()), context_id);
        locked.settle(row);
        if (!replayed) {
            ++result.release_failures;
            continue;
        }
        ++result.released;
        if (plan.mark_processed(row.type)) fetch_dependents(t1, locked, plan, twins, row.type);
    }
}

/// The waiting messages of `type`'s dependents not fetched yet: stored rows read only for the
/// types that may have some, and the batch's unstored rows.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::fetch_dependents(transaction& t1, const locked_instance& locked,
                                                                       detail::release_plan& plan, detail::twin_rows& twins,
                                                                       const std::string& type) {
    std::vector<const std::string*> fresh;
    for (const auto& dependent : catalog_.find(type)->dependents)
        if (!plan.fetched(dependent)) fresh.push_back(&dependent);
    std::vector<std::string> stored;
    for (const std::string* dependent : fresh) {
        plan.mark_fetched(*dependent);
        if (locked.may_wait(*dependent)) stored.push_back(*dependent);
    }
    if (!stored.empty())
        for (auto& row : locked.waiting_rows(t1, stored))
            if (twins.admit(row)) plan.add(std::move(row));
    locked.add_unstored(plan, [&](const std::string& t) { return std::ranges::any_of(fresh, [&](const std::string* f) { return *f == t; }); });
}

/// Closes the locked instance; `locked` says so from now on (a batch decides more on it).
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::close(transaction& t1, locked_instance& locked, const std::string& context_id) {
    locked.row.state = instance_state::closed;
    close(t1, locked.row.id, context_id);
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::close(transaction& t1, instance_id instance, const std::string& context_id) {
    t1.close_instance(instance, clock_.now());
    decision event = about(decision_kind::closed, {}, {}, context_id);
    event.instance = instance;
    decided(event);
}

/// Replays a buffered message. On failure: error sink first, then FAILED and the claim
/// deleted in one transaction, so a resend can retry and nothing is lost.
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::replay(scope& s, const message_record& row, const std::vector<message_id>& twins,
                                                             const std::string& context_id) {
    transaction& t1 = s.t1;
    if (!twins.empty())
        log(log_level::warn, [&] {
            return std::to_string(twins.size() + 1) + " historical WAITING rows for " + detail::loggable_message(row.type, row.idempotence_id) +
                   ": replayed once, every row gets its state";
        });
    require_alive(t1, row.type, row.idempotence_id, "before a released listener");
    const entry& type = *catalog_.find(row.type);
    const envelope record = row.payload.value_or(envelope{});
    bool decoded = false;
    try {
        if (!row.payload) throw error(error_category::bad_message, "the waiting row holds no record to replay");
        auto again = decoder_.decode(record);
        decoded = true;
        guarded_invoke(t1, again.message, record, type, row.idempotence_id, context_id);
    } catch (const store_fault&) {
        throw;
    } catch (...) {
        require_connection(t1, row.type, row.idempotence_id);
        const listener_fault fault = decoded ? current_fault() : undecodable_on_replay();
        const std::string& reason = fault.reason;
        // At once, even in a batch: no source brings a released message back, so a crash
        // between the commit and a later publication would lose it.
        sink_->publish({record, reason, row.type, row.idempotence_id, context_id, fault.kind});
        fail_buffered(s, std::span<const message_record>(&row, 1), [&](const message_record&) { return twins; });
        decided(about(decision_kind::release_failed, row.type, row.idempotence_id, context_id, reason));
        return false;
    }
    require_alive(t1, row.type, row.idempotence_id, "while a released listener ran");
    const timestamp now = clock_.now();
    run_state(s, [&](transaction* tx) { set_state(*tx, row, twins, message_state::processed, now); });
    decision event = about(decision_kind::released, row.type, row.idempotence_id, context_id);
    event.waited = now - row.created_at;
    decided(event);
    return true;
}

/// Buffered messages that failed (a replay threw, or a full buffer dead-lettered them) become
/// FAILED and lose their claims in one transaction, so that a resend retries each: in a batch its
/// transaction (the savepoint undid a failed listener's writes), else one of their own, kept
/// whatever T1 does. `twins_of(row)`: the row's twins, given the same state.
template <class Store, class Source, class ErrorSink, class Policies>
template <class TwinsOf>
void basic_inbox<Store, Source, ErrorSink, Policies>::fail_buffered(scope& s, std::span<const message_record> rows, TwinsOf twins_of) {
    const timestamp now = clock_.now();
    auto mark_failed = [&](transaction* tx) {
        for (const auto& row : rows) {
            set_state(*tx, row, twins_of(row), message_state::failed, now);
            forget(s, *tx, row.key());
        }
    };
    if (s.batch != nullptr)
        mark_failed(&s.t1);
    else
        propagation::requires_new::run(*store_, s.t1, mark_failed);
}

/// A replayed row's new state, on its twins too; a row the batch did not store yet is stored
/// once, in that state.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::set_state(transaction& tx, const message_record& row,
                                                                const std::vector<message_id>& twins, message_state state, timestamp now) {
    if (row.id == 0) {
        message_record settled = row;
        settled.state = state;
        settled.state_changed_at = now;
        warn_if_taken_over(tx.store_message(std::move(settled)), row.key());
        return;
    }
    for (message_id id : with_twins(row.id, twins)) tx.update_message_state(id, state, now);
}

template <class Store, class Source, class ErrorSink, class Policies>
std::vector<message_id> basic_inbox<Store, Source, ErrorSink, Policies>::with_twins(message_id id, std::vector<message_id> twins) {
    twins.insert(twins.begin(), id);
    return twins;
}

}  // namespace seqinbox
