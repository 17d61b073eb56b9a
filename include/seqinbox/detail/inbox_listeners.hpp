#pragma once
// basic_inbox runs a listener: under the Propagation policy, scoped by a savepoint where a
// failure must undo only its writes, and what a listener's exception means for the delivery.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <string>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

/// One delivery's T1 rolls back whole on a failure; in a batch a savepoint scopes the
/// listener's writes under `required`, as for a released message.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::invoke_direct(scope& s, const delivery& d) {
    if (s.batch != nullptr)
        guarded_invoke(s.t1, d.message, d.record, *d.type, d.idempotence_id, d.context_id, false);
    else
        invoke(d.message, d.record, *d.type, d.idempotence_id, d.context_id, false, &s.t1);
}

/// Under `required` the listener writes into T1, so a failing replay must undo only its own
/// writes: a savepoint scopes them. A store error at the savepoint's bounds (a deferred write
/// sent with it failed) is a store_fault: it fails the transaction with its own cause, and
/// never counts as the listener's failure.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::guarded_invoke(transaction& t1, const message_type& message, const envelope& record,
                                                                     const entry& type, const std::string& idempotence_id,
                                                                     const std::string& context_id, bool replayed) {
    if constexpr (Propagation::joins_claim_transaction) {  // savepoints: only then required of the store
        const auto point = store_step(t1, [&] { return t1.savepoint(); });
        try {
            invoke(message, record, type, idempotence_id, context_id, replayed, &t1);
        } catch (...) {
            if (!t1.active()) throw;  // T1 is gone: the caller has the delivery redelivered
            store_step(t1, [&] {
                t1.rollback_to(point);
                end_scope(t1, point);
            });
            throw;
        }
        store_step(t1, [&] { end_scope(t1, point); });
    } else {
        invoke(message, record, type, idempotence_id, context_id, replayed, &t1);
    }
}

/// A savepoint's scope ends once its listener returned (where the store can say so): its
/// writes join the enclosing transaction, and the savepoints of a batch do not nest.
template <class Store, class Source, class ErrorSink, class Policies>
template <class Point>
void basic_inbox<Store, Source, ErrorSink, Policies>::end_scope(transaction& t1, const Point& point) {
    if constexpr (requires { t1.release(point); }) t1.release(point);
}

template <class Store, class Source, class ErrorSink, class Policies>
template <class Step>
decltype(auto) basic_inbox<Store, Source, ErrorSink, Policies>::store_step(transaction& t1, Step step) {
    try {
        return step();
    } catch (const store_fault&) {
        throw;
    } catch (const error& e) {
        if (!t1.active() && e.category() != error_category::connection)
            throw store_fault(error(error_category::connection, std::string("the claim transaction lost its connection: ") + e.what()));
        throw store_fault(e);
    }
}

/// Runs the listener under the Propagation policy; `t1` is null on the unsequenced path.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::invoke(const message_type& message, const envelope& record, const entry& type,
                                                             const std::string& idempotence_id, const std::string& context_id,
                                                             bool replayed, transaction* t1) {
    const listener_fn& fn = listeners_.at(type.qualified);
    auto call = [&](transaction* tx) { fn(message, context{record, type.qualified, idempotence_id, context_id, replayed, tx}); };
    if (t1 == nullptr) {
        call(nullptr);
    } else {
        Propagation::run(*store_, *t1, call);
        // A listener that swallowed the error of its own statement in T1 failed: T1 is aborted,
        // and the next listener's statements would fail in its name.
        if constexpr (Propagation::joins_claim_transaction && requires { t1->aborted(); })
            if (t1->aborted())
                throw error(error_category::bad_message, "a statement of the listener failed in the claim transaction, and the listener "
                                                         "went on (PostgreSQL aborted the transaction)");
    }
    metrics_.consumed(type.qualified);
}

/// Called while a listener failure is being handled: when T1 itself is gone (its connection
/// was lost, perhaps under the listener's own statements), the message did not fail — the
/// delivery did, so it must not be acknowledged but redelivered.
/// Without T1 the claim and the instance lock are gone: nothing more may run or be stored.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::require_alive(transaction& t1, const std::string& type,
                                                                    const std::string& idempotence_id, const char* when) {
    if (!t1.active())
        throw error(error_category::connection, "the claim transaction lost its connection " + std::string(when) + " (" +
                                                    detail::loggable_message(type, idempotence_id) + "); not stored, redeliver");
}

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::require_connection(transaction& t1, const std::string& type,
                                                                         const std::string& idempotence_id) {
    if (!t1.active())
        throw error(error_category::connection, "the claim transaction of " + detail::loggable_message(type, idempotence_id) +
                                                    " lost its connection while the listener ran (" +
                                                    current_exception_text() + "); redeliver");
}

template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::current_fault() -> listener_fault {
    try {
        throw;
    } catch (const seqinbox::listener_failure& f) {
        return {std::string(to_string(f.kind())) + ": " + f.what(), f.kind()};
    } catch (...) {
        return {"listener failed: " + current_exception_text(), failure_kind::listener_failed};
    }
}

template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::undecodable_on_replay() -> listener_fault {
    return {"undecodable on replay: " + current_exception_text(), failure_kind::undecodable_on_replay};
}

}  // namespace seqinbox
