#pragma once
// basic_inbox, the steps of docs/processing.md that sequence and decide_claimed (seqinbox/inbox.hpp)
// run for one sequenced delivery: the instance and the claim (steps 3 and 4), a key handled
// before (5), buffering, the state step or a failure (6), and the release PROCESSED starts (7).
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// Only when the claim was won: the delivery's instance, locked, and the key's rows.
template <class Store, class Source, class ErrorSink, class Policies>
struct basic_inbox<Store, Source, ErrorSink, Policies>::claim_attempt {
    transaction t1;
    bool won;
    locked_instance locked;
    std::vector<message_record> existing;
};

/// Step 3: the instance, then the claim in a new T1 which, when won, holds the instance lock
/// and the key's rows (with insert_first read under the lock, so they include what a release
/// pass that replayed this key's WAITING row, stored beside a claim transaction that died,
/// stored before we got the lock).
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::acquire_claim(const delivery& d, timestamp now) -> claim_attempt {
    for (int attempt = 1;; ++attempt) {
        const auto& seq = *d.type->sequence;
        sequence_instance instance = store_->create_or_get_instance(seq.name, d.context_id, now, now + seq.retention);
        transaction t1 = store_->begin();
        std::optional<claim_result> claimed = try_claim(t1, d, instance.id, now, attempt);
        if (!claimed) continue;
        if (!claimed->won) return {std::move(t1), false, {}, {}};
        const sequence_instance& row = claimed->locked.row;
        if (row.sequence == seq.name && row.context_id == d.context_id)
            return {std::move(t1), true, held(std::move(claimed->locked)), std::move(claimed->rows)};
        t1.rollback();
        reclaim_after_mismatch(d, row, attempt);
    }
}

/// The claim on `instance`; none when the instance was removed meanwhile and one more attempt
/// may read it afresh (the store forgot it when the claim failed with SQLSTATE 23503).
template <class Store, class Source, class ErrorSink, class Policies>
std::optional<claim_result> basic_inbox<Store, Source, ErrorSink, Policies>::try_claim(transaction& t1, const delivery& d,
                                                                                       instance_id instance, timestamp now, int attempt) {
    try {
        return Claim::acquire(t1, claim_request{d.key(), instance, now});
    } catch (const error& e) {
        if (attempt >= max_claim_attempts || e.category() != error_category::retryable || e.sqlstate() != instance_removed_sqlstate) throw;
        log(log_level::info, [&] { return "instance " + std::to_string(instance) + " of " + describe(d) + " was removed meanwhile; claiming again"; });
        return std::nullopt;
    }
}

/// The id the store gave for the delivery's context locks another context's instance: the
/// store answered from what it read before a server crash, a failover or a restore that lost
/// the instance, and the id went to another instance since. The store forgets it.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::reclaim_after_mismatch(const delivery& d, const sequence_instance& locked,
                                                                             int attempt) {
    store_->forget_instance(locked.id);
    auto what = [&] {
        return "instance " + std::to_string(locked.id) + " given for " + describe(d) + " belongs to " + detail::printable(locked.sequence) +
               " context " + detail::printable(locked.context_id);
    };
    if (attempt >= max_claim_attempts) throw error(error_category::retryable, what() + "; retry the delivery");
    log(log_level::warn, [&] { return what() + " (the server lost the instance it was created as); claiming again"; });
}

/// A WAITING row of the key may have been replayed while this duplicate held its claim: by
/// its own release pass, or by another delivery's while it waited for the instance lock (a
/// WAITING row whose claim transaction died has no claim). When that replay failed, the
/// FAILED message may not keep the claim this duplicate holds, or it could never be retried.
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::failed_meanwhile(transaction& t1, const claim_key& key,
                                                                       const std::vector<message_record>& seen) {
    if (std::ranges::none_of(seen, [](const message_record& r) { return r.state == message_state::waiting; })) return false;
    if (has_handled_row(t1.find_messages(key))) return false;
    log(log_level::warn, [&] { return "the replay of " + detail::loggable_message(key.type, key.idempotence_id) + " failed meanwhile; its claim is deleted"; });
    return true;
}

template <class Store, class Source, class ErrorSink, class Policies>
delivery_result& basic_inbox<Store, Source, ErrorSink, Policies>::skipped(const delivery& d, delivery_result& result, const char* why) {
    decided(about(d, decision_kind::duplicate, why));
    return result;
}

/// Stores the delivery's row in the state step. A FAILED row of the key takes the new state
/// instead of a second row (a release failure is stored on its own, so the transaction that
/// released it may roll back its predecessor afterwards). Should T1's connection die before
/// the step commits, a takeover of the claim and this step are serialised per key by the
/// store, so one of them finds the other's row rather than adding a second.
/// REQUIRES_NEW beside T1 is durable once T1 ends: its commit may flush both.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::store_state(scope& s, const delivery& d, message_record row) {
    if (s.joined())
        warn_if_taken_over(s.t1.store_message(std::move(row)), d);
    else
        warn_if_taken_over(store_->store_message_beside(s.t1, std::move(row)), d);
}

/// The inbox state step: in T1 under `required` or in a batch, else in a transaction of its own.
template <class Store, class Source, class ErrorSink, class Policies>
template <class Step>
void basic_inbox<Store, Source, ErrorSink, Policies>::run_state(scope& s, Step step) {
    if (s.joined())
        step(&s.t1);
    else
        propagation::requires_new::run(*store_, s.t1, step);
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::warn_if_taken_over(stored_as what, const delivery& d) {
    if (what == stored_as::left_existing) warn_taken_over(describe(d));
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::warn_if_taken_over(stored_as what, const claim_key& key) {
    if (what == stored_as::left_existing) warn_taken_over(detail::loggable_message(key.type, key.idempotence_id));
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::warn_taken_over(const std::string& message) {
    log(log_level::warn, [&] {
        return "a takeover of the claim stored " + message + " first; its row is kept" +
               " (the listener may have run twice: the documented at-least-once window)";
    });
}

/// `failed`: the key's rows, all FAILED; the newest takes the WAITING state (store_message).
/// Returns why the store cannot keep the record (then nothing is stored), or "".
template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::buffer(scope& s, locked_instance& locked, const delivery& d,
                                                                    const std::vector<message_record>& failed, timestamp now) {
    message_record row = row_for(locked.row.id, d, message_state::waiting, now, true);
    if (auto problem = buffering_problem(row); !problem.empty()) return problem;
    if (s.batch != nullptr)
        locked.unstored.push_back({std::move(row), failed.empty() ? 0 : std::ranges::max(failed, {}, &message_record::id).id});
    else
        store_state(s, d, std::move(row));
    return {};
}

/// A store with a bound on what one row may hold (MariaDB: a statement within max_allowed_packet)
/// says why it cannot keep `row`; the record is then failed, not retried forever.
template <class Store, class Source, class ErrorSink, class Policies>
std::string basic_inbox<Store, Source, ErrorSink, Policies>::buffering_problem(const message_record& row) const {
    if constexpr (requires(const Store& st) {
                      { st.buffering_problem(row) } -> std::convertible_to<std::string>;
                  })
        return store_->buffering_problem(row);
    else
        return {};
}

/// The listener threw on the direct path: FAILED, the claim gone (so that a resend retries),
/// the error sink told. One delivery: FAILED in its own transaction, then the sink, then T1
/// rolls back (or, keeping a first-seen start it recorded, deletes the claim and commits).
/// In a batch: all in the batch's transaction, the sink after its commit.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::fail(scope& s, instance_id instance, const delivery& d, const listener_fault& fault,
                                                            bool keep_start) {
    const std::string& reason = fault.reason;
    message_record row = row_for(instance, d, message_state::failed, clock_.now(), false);
    if (s.batch != nullptr) {
        forget(s, s.t1, d.key());
        warn_if_taken_over(s.t1.store_message(std::move(row)), d);
    } else {
        // Durable before the error sink hears of it, and kept when T1 rolls back.
        warn_if_taken_over(store_->store_message(std::move(row)), d);
    }
    publish(s.batch, {d.record, reason, d.type->qualified, d.idempotence_id, d.context_id, fault.kind});
    if (s.batch == nullptr && keep_start && !s.joined()) {
        // A first-seen context's start, recorded in T1, must outlive the failure: else the next
        // number would start the context and this one, resent, would count as below it. Not
        // under `required`: the failed listener's writes are in T1, which must roll back.
        forget(s, s.t1, d.key());
        s.t1.commit();
    } else if (s.batch == nullptr) {
        s.t1.rollback();
    }
    decided(about(d, decision_kind::failed, reason));
}

/// Step 7: release what `type` (now PROCESSED) unblocks, then close the instance if complete.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::after_processed(scope& s, const delivery& d, locked_instance& locked,
                                                                      const std::string& type, delivery_result& result) {
    transaction& t1 = s.t1;
    locked.processed.insert(type);
    if (d.number) {  // numbered: released in number order, never closed by completion
        detail::note_released(t1, locked, d.type->sequence->numbering, *d.number);
        return release_numbered(s, locked, d.type->sequence->numbering, d.context_id, result);
    }
    if (!catalog_.find(type)->dependents.empty()) release(s, d, locked, type, result);
    if (locked.row.state == instance_state::open && locked.processed.contains_all(*d.type->sequence_types)) {
        // Every condition holds now: a message still WAITING (its release pass died with its
        // connection after its predecessor's state step committed) must not stay behind.
        release_all_waiting(s, locked, d.context_id, result);
        close(t1, locked, d.context_id);
    }
}

}  // namespace seqinbox
