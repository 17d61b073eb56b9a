#pragma once
// basic_inbox: processes every delivery once and in the declared order per context
// (docs/processing.md, docs/guarantees.md).
//
// Thread-safety: register listeners (on) before the first delivery; after that, deliver,
// deliver_batch, poll_once, poll_batch and drain may be called from any number of threads at once, provided the policies
// are thread-safe as documented by their concepts (the in-memory ones are). Several inbox objects
// sharing one store behave like several service instances sharing one database.
//
// Policies: basic_inbox<Store, Source, ErrorSink, Policies = default_policies>. Policies is a
// bundle of member types (claim, propagation, decoder, clock, metrics, logger; see
// seqinbox/policies.hpp); derive from default_policies to override one. The stateful ones are
// passed as one aggregate, last: `{.logger = logger::stream_logger(std::clog)}`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "seqinbox/batch.hpp"
#include "seqinbox/claim/concept.hpp"
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/concept.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/decision.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/decoder/concept.hpp"
#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/detail/catalog.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/detail/read_ahead.hpp"
#include "seqinbox/detail/release_plan.hpp"
#include "seqinbox/detail/replay_order.hpp"
#include "seqinbox/detail/twin_rows.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/error_sink/concept.hpp"
#include "seqinbox/failure_kind.hpp"
#include "seqinbox/listener.hpp"
#include "seqinbox/logger/concept.hpp"
#include "seqinbox/logger/decision_text.hpp"
#include "seqinbox/logger/null_logger.hpp"
#include "seqinbox/metrics/concept.hpp"
#include "seqinbox/metrics/decision_counts.hpp"
#include "seqinbox/metrics/null_metrics.hpp"
#include "seqinbox/outcome.hpp"
#include "seqinbox/policies.hpp"
#include "seqinbox/propagation/concept.hpp"
#include "seqinbox/propagation/not_supported.hpp"
#include "seqinbox/propagation/required.hpp"
#include "seqinbox/propagation/requires_new.hpp"
#include "seqinbox/source/concept.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/storable_text.hpp"

namespace seqinbox {

template <class Store, class Source, class ErrorSink, class Policies = default_policies>
class basic_inbox {
    static_assert(store_policy<Store>, "seqinbox: the Store policy must model seqinbox::store_policy (seqinbox/store/concept.hpp)");
    static_assert(source_policy<Source>,
                  "seqinbox: the Source policy must model seqinbox::source_policy (seqinbox/source/concept.hpp)");
    static_assert(error_sink_policy<ErrorSink>,
                  "seqinbox: the ErrorSink policy must model seqinbox::error_sink_policy (seqinbox/error_sink/concept.hpp)");
    static_assert(requires { typename Policies::claim; },
                  "seqinbox: the Policies bundle has no member type 'claim'; derive it from seqinbox::default_policies");
    static_assert(requires { typename Policies::propagation; },
                  "seqinbox: the Policies bundle has no member type 'propagation'; derive it from seqinbox::default_policies");
    static_assert(requires { typename Policies::decoder; },
                  "seqinbox: the Policies bundle has no member type 'decoder'; derive it from seqinbox::default_policies");
    static_assert(requires { typename Policies::clock; },
                  "seqinbox: the Policies bundle has no member type 'clock'; derive it from seqinbox::default_policies");
    static_assert(requires { typename Policies::metrics; },
                  "seqinbox: the Policies bundle has no member type 'metrics'; derive it from seqinbox::default_policies");
    static_assert(requires { typename Policies::logger; },
                  "seqinbox: the Policies bundle has no member type 'logger'; derive it from seqinbox::default_policies");

    using Claim = typename Policies::claim;
    using Propagation = typename Policies::propagation;
    using Decoder = typename Policies::decoder;
    using Clock = typename Policies::clock;
    using Metrics = typename Policies::metrics;
    using Logger = typename Policies::logger;

    static_assert(claim_policy<Claim, typename Store::transaction>,
                  "seqinbox: the Claim policy must model seqinbox::claim_policy (seqinbox/claim/concept.hpp)");
    static_assert(propagation_policy<Propagation, Store>,
                  "seqinbox: the Propagation policy must model seqinbox::propagation_policy (seqinbox/propagation/concept.hpp)");
    static_assert(decoder_policy<Decoder>, "seqinbox: the Decoder policy must model seqinbox::decoder_policy (seqinbox/decoder/concept.hpp)");
    static_assert(clock_policy<Clock>, "seqinbox: the Clock policy must model seqinbox::clock_policy (seqinbox/clock/concept.hpp)");
    static_assert(metrics_policy<Metrics>,
                  "seqinbox: the Metrics policy must model seqinbox::metrics_policy (seqinbox/metrics/concept.hpp)");
    static_assert(logger_policy<Logger>, "seqinbox: the Logger policy must model seqinbox::logger_policy (seqinbox/logger/concept.hpp)");

public:
    using message_type = typename Decoder::message_type;
    using transaction = typename Store::transaction;
    using context = listener_context<transaction>;
    using listener_fn = listener<message_type, transaction>;
    using declarations_type = declarations<message_type>;

    /// The stateful policy objects, each default-constructed unless given:
    /// `inbox(store, source, sink, decls, {.logger = logger::stream_logger(std::clog)})`.
    struct policy_objects {
        Decoder decoder{};
        Clock clock{};
        Metrics metrics{};
        Logger logger{};
    };

    basic_inbox(Store& store, Source& source, ErrorSink& sink, declarations_type decls, policy_objects objects = {})
        : store_(&store), source_(&source), sink_(&sink), catalog_(std::move(decls)), decoder_(std::move(objects.decoder)),
          clock_(std::move(objects.clock)), metrics_(std::move(objects.metrics)), logger_(std::move(objects.logger)) {}

    basic_inbox(const basic_inbox&) = delete;
    basic_inbox& operator=(const basic_inbox&) = delete;

    /// Registers the listener of a declared qualified type (`Type` or `Type.SUBTYPE`).
    basic_inbox& on(const std::string& qualified_type, listener_fn fn) {
        if (ready_.load()) throw error(error_category::misuse, "listener for '" + qualified_type + "' registered after the first delivery");
        if (!catalog_.find(qualified_type))
            throw error(error_category::misuse, "no declared message type '" + qualified_type + "' to listen to");
        if (!fn) throw error(error_category::misuse, "empty listener for '" + qualified_type + "'");
        if (!listeners_.emplace(qualified_type, std::move(fn)).second)
            throw error(error_category::misuse, "a listener for '" + qualified_type + "' is already registered");
        return *this;
    }

    /// Takes the decision for one delivery and makes it durable. Does not acknowledge: the
    /// caller acknowledges when this returns. Throws (connection, retryable, ...) when no
    /// durable decision was reached; the delivery must then be delivered again.
    delivery_result deliver(const envelope& record) {
        ensure_ready();
        const auto started = std::chrono::steady_clock::now();
        auto result = decide(record);
        metrics_.handled(metric_type(result), std::chrono::steady_clock::now() - started);
        return result;
    }

    /// Polls one delivery from the source, decides it and acknowledges it. When no durable
    /// decision was reached (deliver throws), a redelivering source gets the delivery back.
    std::optional<delivery_result> poll_once() {
        auto record = source_->poll();
        if (!record) return std::nullopt;
        auto result = deliver_or_give_back(*record);
        source_->acknowledge(*record);
        return result;
    }

    /// Polls until the source has nothing ready; returns how many deliveries were decided.
    std::size_t drain() {
        std::size_t count = 0;
        while (poll_once()) ++count;
        return count;
    }

    /// Decides `records` in as few transactions as the store's limits allow (seqinbox/batch.hpp;
    /// one unless the batch is larger than max_batch_records()), in order: every result is the
    /// one delivering them one after another in this order would give, and the error sink hears
    /// of a part's direct failures and rejections once it committed (of a released message's
    /// failure at once). Does not acknowledge. Throws when a part did not commit: deliver all of
    /// it again (records of parts that committed are then duplicates).
    std::vector<delivery_result> deliver_batch(std::span<const envelope> records, const batch_hooks& hooks = {})
        requires batch_claim_policy<Claim, transaction>
    {
        ensure_ready();
        std::vector<delivery_result> results;
        for (const auto part : parts_of(records)) {
            auto decided = deliver_part(part, hooks);
            std::ranges::move(decided, std::back_inserter(results));
        }
        return results;
    }

    /// Polls up to `max` deliveries (the source's poll_batch when it has one), decides them with
    /// deliver_batch and acknowledges each part once it committed. When a part did not commit, a
    /// redelivering source gets it and the rest back (last first, so that it ends at the first
    /// of them) and this rethrows.
    std::vector<delivery_result> poll_batch(std::size_t max, const batch_hooks& hooks = {})
        requires batch_claim_policy<Claim, transaction>
    {
        const std::vector<envelope> records = take(max);
        if (records.empty()) return {};
        ensure_ready();
        std::vector<delivery_result> results;
        for (const auto part : parts_of(records)) {
            std::vector<delivery_result> decided;
            try {
                decided = deliver_part(part, hooks);
            } catch (...) {
                if constexpr (redelivering_source<Source>)
                    for (auto it = records.rbegin(); it != records.rend() && &*it >= part.data(); ++it) source_->redeliver(*it);
                throw;
            }
            for (const auto& record : part) source_->acknowledge(record);
            std::ranges::move(decided, std::back_inserter(results));
        }
        return results;
    }

    /// The most records one batch transaction decides: what the store's limits allow (see its
    /// max_batch_records), unlimited for a store without any.
    std::size_t max_batch_records() const {
        if constexpr (requires(const Store& st) { { st.max_batch_records(true) } -> std::convertible_to<std::size_t>; })
            return std::max<std::size_t>(1, store_->max_batch_records(Propagation::joins_claim_transaction));
        else
            return std::numeric_limits<std::size_t>::max();
    }

    /// Executes pending operator actions (docs/operations.md): up to `pages` pages of `page_size` instances,
    /// each in one transaction under its instance lock, then a release pass and closing where
    /// complete. Returns how many actions ran. Several service instances may run it at once.
    std::size_t run_pending_actions(std::size_t page_size = 100, std::size_t pages = 10)
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

    Store& store() noexcept { return *store_; }
    Metrics& metrics() noexcept { return metrics_; }
    const declarations_type& declared() const noexcept { return catalog_.declared(); }

private:
    using entry = typename detail::catalog<message_type>::type_entry;

    /// What the error sink hears of the exception being handled.
    struct listener_fault {
        std::string reason;
        failure_kind kind;
    };

    delivery_result deliver_or_give_back(const envelope& record) {
        if constexpr (redelivering_source<Source>) {
            try {
                return deliver(record);
            } catch (...) {
                source_->redeliver(record);
                throw;
            }
        } else {
            return deliver(record);
        }
    }
    /// What a batch defers to its commit, and which claims it deleted.
    struct batch_effects {
        std::vector<failed_delivery> to_sink;  ///< the error sink hears once the batch committed
        std::set<claim_key> forgotten;
    };

    /// Where a decision writes: one delivery's T1, or a batch's transaction (`batch` set).
    struct scope {
        transaction& t1;
        batch_effects* batch = nullptr;
        /// The state must commit with a claim T1 took (an operator action on a FAILED message):
        /// durable on its own, it would outlive a crash that loses the claim.
        bool with_claim = false;
        /// Inbox state follows the listener into T1 under `required`, in a batch and with a claim;
        /// else it gets a transaction of its own.
        bool joined() const noexcept { return Propagation::joins_claim_transaction || batch != nullptr || with_claim; }
    };

    void publish(batch_effects* batch, failed_delivery f) {
        if (batch != nullptr)
            batch->to_sink.push_back(std::move(f));
        else
            sink_->publish(f);
    }

    static void forget(scope& s, transaction& tx, const claim_key& key) {
        Claim::forget(tx, key);
        if (s.batch != nullptr) s.batch->forgotten.insert(key);
    }

    struct delivery {
        const envelope& record;
        message_type message;
        const entry* type;
        std::string idempotence_id;
        std::string context_id;
        bool direct = false;  ///< not sequenced: its listener runs without claim or row (step 2)
        claim_key key() const { return {type->qualified, idempotence_id}; }
    };

    void ensure_ready() {
        if (ready_.load(std::memory_order_acquire)) return;
        std::lock_guard lock(ready_mutex_);
        if (ready_.load()) return;
        std::vector<std::string> missing;
        for (const auto& seq : catalog_.declared().sequences)
            for (const auto& msg : seq.messages)
                if (!listeners_.contains(msg.qualified_type())) missing.push_back(msg.qualified_type());
        if (!missing.empty()) throw error(error_category::misuse, "no listener registered for declared types", missing);
        ready_.store(true, std::memory_order_release);
    }

    delivery_result decide(const envelope& record) {
        auto classified = classify(record, nullptr);
        if (auto* d = std::get_if<delivery>(&classified)) return d->direct ? handle_directly(nullptr, *d) : sequence(*d);
        return std::get<delivery_result>(std::move(classified));
    }

    /// Steps 1 and 2: decode, resolve the qualified type, filter, extract the context id; the
    /// delivery to sequence, or the result when it ends here. User callables that throw make the
    /// delivery a bad message rather than one that never ends.
    std::variant<delivery_result, delivery> classify(const envelope& record, batch_effects* batch) {
        std::optional<decoded<message_type>> decoded_message;
        try {
            decoded_message.emplace(decoder_.decode(record));
        } catch (...) {
            return reject(batch, record, rejection::undecodable, "undecodable: " + current_exception_text(), {}, {});
        }
        auto& m = *decoded_message;
        std::string qualified = m.type;
        const entry* type = nullptr;
        bool filtered_out = false;
        std::optional<std::string> context_id;
        try {
            if (const auto* resolver = catalog_.resolver(m.type)) qualified = qualify(m.type, resolver->resolve(m.message, record));
            type = catalog_.find(qualified);
            filtered_out = type != nullptr && type->declaration->filter && !type->declaration->filter(m.message, record);
            if (type != nullptr && !filtered_out) context_id = type->declaration->context_id(m.message, record);
        } catch (...) {
            return reject(batch, record, rejection::unclassifiable, "cannot classify message: " + current_exception_text(), qualified,
                          m.idempotence_id);
        }
        if (type == nullptr)
            return reject(batch, record, rejection::unknown_type, unknown_type_reason(m.type, qualified), qualified, m.idempotence_id,
                          qualified != m.type ? failure_kind::bad_subtype : failure_kind::unknown_type);
        delivery d{record, std::move(m.message), type, std::move(m.idempotence_id), {}};
        d.direct = filtered_out || ((!context_id || context_id->empty()) && handles_without_context_id(d));
        if (d.direct) return d;
        if (!context_id || context_id->empty()) return reject_without_context_id(batch, d);
        d.context_id = std::move(*context_id);
        if (auto problem = unstorable(d); !problem.empty())
            return reject(batch, record, rejection::unstorable, problem, qualified, d.idempotence_id);
        return d;
    }

    /// Why the store could not keep this delivery's keys or buffered record, or "".
    static std::string unstorable(const delivery& d) {
        return first_problem({claim_key_problem(d.type->qualified, d.idempotence_id), key_problem("context id", d.context_id),
                              record_problem(d.record)});
    }

    static std::string unknown_type_reason(const std::string& type, const std::string& qualified) {
        if (qualified != type)
            return "subtype '" + detail::printable(qualified.substr(type.size() + 1)) + "' of message type '" + detail::printable(type) +
                   "' is not declared";
        return "unknown message type '" + detail::printable(type) + "'";
    }

    delivery_result reject(batch_effects* batch, const envelope& record, rejection why, std::string reason, std::string type,
                           std::string idempotence_id, std::optional<failure_kind> kind = std::nullopt) {
        decision event = about(decision_kind::rejected, type, idempotence_id, {}, reason);
        event.rejection = why;
        decided(event);
        delivery_result result{outcome::rejected, std::move(type), std::move(idempotence_id), {}, 0, 0, why};
        publish(batch, {record, std::move(reason), result.qualified_type, result.idempotence_id, {}, kind.value_or(kind_of(why))});
        return result;
    }

    static constexpr failure_kind kind_of(rejection why) noexcept {
        switch (why) {
        case rejection::undecodable: return failure_kind::undecodable;
        case rejection::unclassifiable: return failure_kind::unclassifiable;
        case rejection::unknown_type: return failure_kind::unknown_type;
        case rejection::no_context_id: return failure_kind::no_context_id;
        case rejection::unstorable: return failure_kind::unstorable_key;
        case rejection::none: break;
        }
        return failure_kind::listener_failed;
    }

    static std::string_view metric_type(const delivery_result& r) { return metric_label(r.qualified_type, r.rejection); }

    /// Step 2, the extractor returned no context id: the type's declared policy decides.
    static bool handles_without_context_id(const delivery& d) {
        return d.type->declaration->missing_context_id == missing_context_id_policy::handle;
    }

    delivery_result reject_without_context_id(batch_effects* batch, delivery& d) {
        return reject(batch, d.record, rejection::no_context_id,
                      "no context id: the extractor of message type '" + detail::printable(d.type->qualified) +
                          "' returned none, and its policy for a missing context id is dead-letter",
                      d.type->qualified, d.idempotence_id);
    }

    /// Step 2: not sequenced, so no claim and no inbox row.
    delivery_result handle_directly(batch_effects* batch, delivery& d) {
        delivery_result result{outcome::not_sequenced, d.type->qualified, d.idempotence_id, {}, 0, 0};
        try {
            invoke(d.message, d.record, *d.type, d.idempotence_id, d.context_id, false, nullptr);
        } catch (...) {
            const auto fault = current_fault();
            publish(batch, {d.record, fault.reason, d.type->qualified, d.idempotence_id, {}, fault.kind});
            result.outcome = outcome::failed;
        }
        decision event = about(d, decision_kind::not_sequenced);
        event.result = result.outcome;
        decided(event);
        return result;
    }

    /// A WAITING message a batch buffered and has not stored: a release within the batch stores
    /// it once, in its final state (no WAITING row and no read of it); the batch's end stores
    /// the rest. Its place in `unstored` is its arrival.
    struct unstored_row {
        message_record row;  ///< id 0: not stored
        message_id takes_over = 0;  ///< the key's FAILED row it will be stored in: its place among stored rows
        bool settled = false;
    };

    /// What the claim transaction knows once it holds the instance row lock. `waiting` (types
    /// with stored WAITING rows) stays complete while the lock is held, so the release pass skips
    /// types with nothing waiting.
    struct locked_instance {
        sequence_instance row;
        detail::processed_set processed;
        std::vector<std::string> waiting;
        std::vector<unstored_row> unstored;  ///< a batch's only
        detail::read_ahead_rows read_ahead;  ///< a batch's only

        bool may_wait(const std::string& type) const { return std::ranges::find(waiting, type) != waiting.end(); }

        /// The WAITING rows of `types`: read ahead by the batch when it read them all, else asked.
        std::vector<message_record> waiting_rows(transaction& t1, std::span<const std::string> types) const {
            if (read_ahead.covers(types)) return read_ahead.of(types);
            return t1.waiting_messages(row.id, types);
        }

        /// The unstored rows still waiting whose type `wanted(type)` accepts, into `plan`.
        template <class Wanted>
        void add_unstored(detail::release_plan& plan, Wanted wanted) const {
            for (std::size_t i = 0; i < unstored.size(); ++i)
                if (!unstored[i].settled && wanted(unstored[i].row.type)) {
                    if (unstored[i].takes_over != 0) plan.add_in_place_of(unstored[i].row, unstored[i].takes_over);
                    else plan.add_unstored(unstored[i].row, i);
                }
        }

        /// The replay of `row` stored its final state: not stored again at the batch's end, not
        /// read ahead any longer.
        void settle(const message_record& row) {
            if (row.id != 0) return read_ahead.settle(row.key());
            for (auto& u : unstored)
                if (u.row.key() == row.key()) u.settled = true;
        }
    };

    static locked_instance lock(transaction& t1, instance_id instance) { return held(t1.lock_instance(instance)); }

    static locked_instance held(instance_lock lock) {
        return {std::move(lock.row), detail::processed_set(std::move(lock.types.processed)), std::move(lock.types.waiting), {}, {}};
    }

    /// Steps 3 to 7 of docs/processing.md.
    delivery_result sequence(delivery& d) {
        const timestamp now = clock_.now();
        auto [t1, won, locked, existing] = acquire_claim(d, now);
        scope s{t1};
        delivery_result result = decide_claimed(s, d, won, locked, existing, now);
        if (result.outcome != outcome::failed) t1.commit();  // a failure rolled T1 back
        return result;
    }

    /// Steps 4 to 7, once the claim was tried; the caller commits (one delivery's T1, or a batch).
    delivery_result decide_claimed(scope& s, delivery& d, bool won, locked_instance& locked, const std::vector<message_record>& existing,
                                   timestamp now) {
        transaction& t1 = s.t1;
        delivery_result result{outcome::duplicate, d.type->qualified, d.idempotence_id, d.context_id, 0, 0};
        if (!won) return skipped(d, result, "already claimed");
        const instance_id instance = locked.row.id;
        if (has_handled_row(existing)) {
            if (existing.size() > 1)
                log(log_level::warn, [&] { return std::to_string(existing.size()) + " historical rows for " + describe(d) + ", treated as handled"; });
            heal_locked(s, locked, d.context_id, *d.type->sequence_types, result);
            if (failed_meanwhile(t1, d.key(), existing)) forget(s, t1, d.key());  // keep the FAILED message retryable
            return skipped(d, result, "already handled");
        }
        if (waits(d, locked, now)) {
            buffer(s, locked, d, existing, now);
            result.outcome = outcome::buffered;
            decided(about(d, decision_kind::buffered));
            return result;
        }
        try {
            invoke_direct(s, d);
        } catch (const store_fault&) {
            throw;
        } catch (...) {
            require_connection(t1, d.type->qualified, d.idempotence_id);
            fail(s, instance, d, current_fault());  // the kind and text of the exception being handled
            result.outcome = outcome::failed;
            return result;
        }
        // A waiting duplicate takes over once T1's connection is lost: storing PROCESSED beside
        // its row would make two. The listener did run (the documented at-least-once window).
        require_alive(t1, d.type->qualified, d.idempotence_id, "while the listener ran");
        store_state(s, d, row_for(instance, d, message_state::processed, now, false));
        result.outcome = outcome::processed;
        decided(about(d, decision_kind::processed));
        after_processed(s, d, locked, d.type->qualified, result);
        return result;
    }

    /// One delivery's T1 rolls back whole on a failure; in a batch a savepoint scopes the
    /// listener's writes under `required`, as for a released message.
    void invoke_direct(scope& s, const delivery& d) {
        if (s.batch != nullptr)
            guarded_invoke(s.t1, d.message, d.record, *d.type, d.idempotence_id, d.context_id, false);
        else
            invoke(d.message, d.record, *d.type, d.idempotence_id, d.context_id, false, &s.t1);
    }

    // ---- batches ----

    std::vector<envelope> take(std::size_t max) {
        if constexpr (batch_source<Source>) {
            return source_->poll_batch(max);
        } else {
            std::vector<envelope> records;
            while (records.size() < max)
                if (auto record = source_->poll()) records.push_back(std::move(*record));
                else break;
            return records;
        }
    }

    /// `records` in consecutive parts of at most max_batch_records().
    std::vector<std::span<const envelope>> parts_of(std::span<const envelope> records) const {
        const std::size_t most = max_batch_records();
        std::vector<std::span<const envelope>> parts;
        for (std::size_t first = 0; first < records.size(); first += most)
            parts.push_back(records.subspan(first, std::min(most, records.size() - first)));
        return parts;
    }

    /// deliver_batch of one part, in one transaction.
    std::vector<delivery_result> deliver_part(std::span<const envelope> records, const batch_hooks& hooks) {
        const auto started = std::chrono::steady_clock::now();
        std::vector<delivery_result> results(records.size());
        batch_effects classified;  // the rejections and unsequenced failures: no transaction
        std::vector<batch_item> items = classify_batch(records, classified, results);
        batch_effects effects = sequence_batch(items, results, hooks);
        for (auto* f : {&classified.to_sink, &effects.to_sink})
            for (const auto& failure : *f) sink_->publish(failure);
        const auto elapsed = std::chrono::steady_clock::now() - started;
        for (const auto& result : results) metrics_.handled(metric_type(result), elapsed);
        return results;
    }

    /// A sequenced delivery of a batch: its place in the batch, its instance, its claim once tried.
    struct batch_item {
        std::size_t index;
        delivery d;
        instance_id instance = 0;
        std::optional<claim_result> claim{};
    };

    std::vector<batch_item> classify_batch(std::span<const envelope> records, batch_effects& effects, std::vector<delivery_result>& results) {
        std::vector<batch_item> items;
        for (std::size_t i = 0; i < records.size(); ++i) {
            auto classified = classify(records[i], &effects);
            if (auto* d = std::get_if<delivery>(&classified)) items.push_back({i, std::move(*d)});
            else results[i] = std::get<delivery_result>(std::move(classified));
        }
        return items;
    }

    /// Steps 3 to 7 for the batch's sequenced deliveries, in one transaction; again from the
    /// start when an instance was removed or belongs to another context (as for one delivery).
    /// The instances come before the transaction begins: a batch holds one pooled connection, as
    /// one delivery under `required` does.
    batch_effects sequence_batch(std::vector<batch_item>& items, std::vector<delivery_result>& results, const batch_hooks& hooks) {
        for (int attempt = 1;; ++attempt) {
            batch_effects effects;
            if (items.empty() && !hooks.before_commit) return effects;
            const timestamp now = clock_.now();
            std::vector<batch_item*> all;
            for (auto& item : items) all.push_back(&item);
            resolve_instances(all, now);
            transaction tx = store_->begin();
            scope s{tx, &effects};
            if (!decide_rounds(s, all, results, attempt, now)) continue;
            if (hooks.before_commit) hooks.before_commit();
            tx.commit();
            return effects;
        }
    }

    using context_key = std::pair<std::string, std::string>;  ///< sequence, context id

    static context_key context_of(const batch_item& item) { return {item.d.type->sequence->name, item.d.context_id}; }

    /// The batch in rounds. A round claims, in one claim_batch, the first delivery of every key
    /// not claimed yet, then decides the deliveries in batch order, each after the earlier ones of
    /// its context. A key met again is claimed in a later round, once its first delivery was
    /// decided, so that the claim sees how that one ended — unless the batch did not delete that
    /// claim since: won by the batch or lost to another transaction, it is lost again without
    /// asking (its decision, a skip, changes nothing, so it may count as taken with the first).
    /// So later rounds only follow failures, every claim in them is of a key this transaction
    /// deleted, none waits for another transaction, and the first round takes claims and locks in
    /// a fixed order (two batches do not wait for each other in a cycle). What the batch buffered
    /// and did not release is stored at the end. False: start the batch again.
    bool decide_rounds(scope& s, std::vector<batch_item*> pending, std::vector<delivery_result>& results, int attempt, timestamp now) {
        std::map<instance_id, locked_instance> locked;
        std::set<claim_key> tried;  // keys whose claim a decision of the batch tried
        for (bool first = true; !pending.empty(); first = false) {
            const auto round = to_claim(pending, tried, s.batch->forgotten);
            if (first ? !claim_round(s, round, now, attempt) : !claim_later_round(s, round, now)) return false;
            hold_won(round, locked);
            read_ahead(s.t1, round, pending, locked, now);
            std::vector<batch_item*> undecided;
            std::set<context_key> behind;  // contexts with an undecided delivery earlier in this round
            bool barrier = false;  // an unsequenced delivery waits for one before it: so does everything after it
            for (batch_item* item : pending) {
                if (item->d.direct && !barrier && undecided.empty()) {  // in its place: after the records before it
                    results[item->index] = handle_directly(s.batch, item->d);
                    continue;
                }
                if (item->d.direct || barrier) {
                    barrier = true;
                    undecided.push_back(item);
                    continue;
                }
                if (behind.contains(context_of(*item)) || !ready(s, *item)) {
                    undecided.push_back(item);
                    behind.insert(context_of(*item));
                    continue;
                }
                claim_result& claim = *item->claim;
                locked_instance unlocked;  // a lost claim reads nothing of it
                auto& instance = claim.won ? locked.at(item->instance) : unlocked;
                results[item->index] = decide_claimed(s, item->d, claim.won, instance, claim.rows, now);
                tried.insert(item->d.key());
            }
            pending = std::move(undecided);
        }
        store_unstored(s, locked);
        return true;
    }

    /// The instances of the round's won claims, as their claims locked them; one the batch holds
    /// already keeps what its decisions made of it.
    static void hold_won(const std::vector<batch_item*>& round, std::map<instance_id, locked_instance>& locked) {
        for (batch_item* item : round)
            if (item->claim->won && !locked.contains(item->instance)) locked.emplace(item->instance, held(std::move(item->claim->locked)));
    }

    /// The WAITING rows the batch's release passes may reach in the instances it holds, read at
    /// once (detail/read_ahead.hpp): of the types that depend on a won delivery that does not
    /// wait, and on those of them that may be processed too (rows waiting, or delivered in the
    /// batch). What a release pass needs beyond them it asks the store for.
    void read_ahead(transaction& t1, const std::vector<batch_item*>& round, const std::vector<batch_item*>& pending,
                    std::map<instance_id, locked_instance>& locked, timestamp now) {
        std::map<instance_id, std::set<std::string>> delivered, wanted;
        for (const batch_item* item : pending) delivered[item->instance].insert(item->d.type->qualified);
        for (const batch_item* item : round) {
            if (!item->claim->won) continue;
            const locked_instance& instance = locked.at(item->instance);
            if (waits(item->d, instance, now)) continue;
            const auto may_be_processed = [&](const std::string& t) { return instance.may_wait(t) || delivered[item->instance].contains(t); };
            for (const std::string& type : dependents_of(item->d.type->qualified, may_be_processed))
                if (instance.may_wait(type) && !instance.read_ahead.has_type(type)) wanted[item->instance].insert(type);
        }
        if (wanted.empty()) return;
        std::vector<waiting_query> queries;
        for (auto& [id, types] : wanted) queries.push_back({id, {types.begin(), types.end()}});
        auto rows = waiting_rows_of(t1, queries);
        for (std::size_t k = 0; k < queries.size(); ++k)
            locked.at(queries[k].instance).read_ahead.add(std::move(queries[k].types), std::move(rows[k]));
    }

    /// The types whose conditions name `type`, and theirs when `may_be_processed` says so, and
    /// so on.
    template <class Predicate>
    std::set<std::string> dependents_of(const std::string& type, Predicate may_be_processed) const {
        std::set<std::string> found;
        std::vector<const std::string*> next{&type};
        while (!next.empty()) {
            const std::string* t = next.back();
            next.pop_back();
            for (const auto& dependent : catalog_.find(*t)->dependents)
                if (found.insert(dependent).second && may_be_processed(dependent)) next.push_back(&dependent);
        }
        return found;
    }

    /// waiting_messages for many instances: in one call when the transaction can.
    static std::vector<std::vector<message_record>> waiting_rows_of(transaction& t1, std::span<const waiting_query> queries) {
        if constexpr (requires { t1.waiting_messages(queries); }) {
            return t1.waiting_messages(queries);
        } else {
            std::vector<std::vector<message_record>> rows;
            for (const auto& q : queries) rows.push_back(t1.waiting_messages(q.instance, q.types));
            return rows;
        }
    }

    /// Every item's instance, unclaimed: in one call when the store can create many at once.
    void resolve_instances(const std::vector<batch_item*>& all, timestamp now) {
        std::vector<batch_item*> items;
        std::ranges::copy_if(all, std::back_inserter(items), [](const batch_item* item) { return !item->d.direct; });
        auto creation = [&](const batch_item& item) {
            const auto& seq = *item.d.type->sequence;
            return instance_creation{seq.name, item.d.context_id, now, now + seq.retention};
        };
        for (batch_item* item : items) item->claim.reset();
        if constexpr (requires(std::span<const instance_creation> many) { store_->create_or_get_instances(many); }) {
            std::vector<instance_creation> creations;
            for (const batch_item* item : items) creations.push_back(creation(*item));
            const auto rows = store_->create_or_get_instances(std::span<const instance_creation>(creations));
            for (std::size_t k = 0; k < items.size(); ++k) items[k]->instance = rows[k].id;
        } else {
            for (batch_item* item : items) {
                const auto c = creation(*item);
                item->instance = store_->create_or_get_instance(c.sequence, c.context_id, c.created_at, c.retain_until).id;
            }
        }
    }

    /// A later round's claims come after listeners ran: when an instance was removed meanwhile
    /// (housekeeping, with the other transaction's claim of a key met again) or belongs to
    /// another context, only the round is claimed again, from a savepoint, on instances read
    /// afresh. Without savepoints the batch starts again (its listeners run again).
    bool claim_later_round(scope& s, const std::vector<batch_item*>& round, timestamp now) {
        if (round.empty()) return true;
        if constexpr (savepoint_transaction<transaction>) {
            for (int attempt = 1;; ++attempt) {
                auto point = s.t1.savepoint();
                if (claim_round(s, round, now, attempt)) return true;
                s.t1.rollback_to(point);
                resolve_instances(round, now);
            }
        } else {
            return claim_round(s, round, now, max_claim_attempts);
        }
    }

    /// The first delivery of each key that has no claim result yet; one whose key's claim the
    /// batch tried before (and did not delete since) is lost again without asking.
    static std::vector<batch_item*> to_claim(const std::vector<batch_item*>& pending, const std::set<claim_key>& tried,
                                             const std::set<claim_key>& forgotten) {
        std::set<claim_key> keys;
        std::vector<batch_item*> round;
        for (batch_item* item : pending) {
            if (item->d.direct || !keys.insert(item->d.key()).second || item->claim) continue;
            if (tried.contains(item->d.key()) && !forgotten.contains(item->d.key()))
                item->claim = claim_result{};
            else
                round.push_back(item);
        }
        return round;
    }

    /// Claimed and decidable now. A claim made before the batch deleted its key (a failed replay
    /// of that key) is tried again: claimed one by one, after that replay, it would have won, and
    /// seen the FAILED row (a check_then_insert claim "wins" with the rows it read before).
    static bool ready(const scope& s, batch_item& item) {
        if (!item.claim) return false;
        if (!s.batch->forgotten.contains(item.d.key())) return true;
        item.claim.reset();
        return false;
    }

    /// Claims `round`, each result kept with its delivery; false when the batch must start again
    /// (an instance was removed or belongs to another context: the store forgets what it
    /// remembered of them).
    bool claim_round(scope& s, const std::vector<batch_item*>& round, timestamp now, int attempt) {
        if (round.empty()) return true;
        std::vector<claim_request> requests;
        for (const batch_item* item : round) requests.push_back({item->d.key(), item->instance, now});
        std::vector<claim_result> claimed;
        try {
            claimed = Claim::acquire_batch(s.t1, std::span<const claim_request>(requests));
        } catch (const error& e) {
            if (attempt >= max_claim_attempts || e.category() != error_category::retryable || e.sqlstate() != instance_removed_sqlstate) throw;
            log(log_level::info, [&] { return "an instance of the batch was removed meanwhile; claiming again"; });
            for (const batch_item* item : round) store_->forget_instance(item->instance);
            return false;
        }
        bool mismatch = false;
        for (std::size_t k = 0; k < round.size(); ++k) {
            const sequence_instance& row = claimed[k].locked.row;
            if (claimed[k].won && (row.sequence != round[k]->d.type->sequence->name || row.context_id != round[k]->d.context_id)) {
                reclaim_after_mismatch(round[k]->d, row, attempt);
                mismatch = true;
            }
            round[k]->claim = std::move(claimed[k]);
            s.batch->forgotten.erase(round[k]->d.key());  // this claim saw every deletion so far
        }
        return !mismatch;
    }

    /// Only when the claim was won: the delivery's instance, locked, and the key's rows.
    struct claim_attempt {
        transaction t1;
        bool won;
        locked_instance locked;
        std::vector<message_record> existing;
    };

    /// Step 3: the instance, then the claim in a new T1 which, when won, holds the instance lock
    /// and the key's rows (with insert_first read under the lock, so they include what a release
    /// pass that replayed this key's WAITING row, stored beside a claim transaction that died,
    /// stored before we got the lock).
    claim_attempt acquire_claim(const delivery& d, timestamp now) {
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
    std::optional<claim_result> try_claim(transaction& t1, const delivery& d, instance_id instance, timestamp now, int attempt) {
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
    void reclaim_after_mismatch(const delivery& d, const sequence_instance& locked, int attempt) {
        store_->forget_instance(locked.id);
        auto what = [&] {
            return "instance " + std::to_string(locked.id) + " given for " + describe(d) + " belongs to " + detail::printable(locked.sequence) +
                   " context " + detail::printable(locked.context_id);
        };
        if (attempt >= max_claim_attempts) throw error(error_category::retryable, what() + "; retry the delivery");
        log(log_level::warn, [&] { return what() + " (the server lost the instance it was created as); claiming again"; });
    }

    static constexpr int max_claim_attempts = 3;

    /// Step 5: the delivery's conditions do not hold yet (and its sequence is not recording).
    static bool waits(const delivery& d, const locked_instance& locked, timestamp now) {
        return !recording(*d.type->sequence, now) && !d.type->declaration->release.satisfied(locked.processed.is_processed());
    }

    static bool recording(const sequence_declaration<message_type>& seq, timestamp now) {
        return seq.recording_until && now < *seq.recording_until;
    }

    static bool has_handled_row(const std::vector<message_record>& rows) {
        return std::ranges::any_of(rows, [](const message_record& r) { return r.state != message_state::failed; });
    }

    /// A WAITING row of the key may have been replayed while this duplicate held its claim: by
    /// its own release pass, or by another delivery's while it waited for the instance lock (a
    /// WAITING row whose claim transaction died has no claim). When that replay failed, the
    /// FAILED message may not keep the claim this duplicate holds, or it could never be retried.
    bool failed_meanwhile(transaction& t1, const claim_key& key, const std::vector<message_record>& seen) {
        if (std::ranges::none_of(seen, [](const message_record& r) { return r.state == message_state::waiting; })) return false;
        if (has_handled_row(t1.find_messages(key))) return false;
        log(log_level::warn, [&] { return "the replay of " + detail::loggable_message(key.type, key.idempotence_id) + " failed meanwhile; its claim is deleted"; });
        return true;
    }

    delivery_result& skipped(const delivery& d, delivery_result& result, const char* why) {
        decided(about(d, decision_kind::duplicate, why));
        return result;
    }

    /// A duplicate still runs a release pass over every WAITING message of the instance: if a
    /// connection died between storing PROCESSED and releasing successors (perhaps successors of
    /// a message this one released), or before its WAITING row committed, so that the row was
    /// stored outside the instance lock, the redelivery releases them. Locks the instance first.
    void heal(scope& s, instance_id instance, const std::string& context_id, const std::vector<std::string>& sequence_types,
              delivery_result& result) {
        transaction& t1 = s.t1;
        locked_instance locked = lock(t1, instance);
        heal_locked(s, locked, context_id, sequence_types, result);
    }

    void heal_locked(scope& s, locked_instance& locked, const std::string& context_id,
                     const std::vector<std::string>& sequence_types, delivery_result& result) {
        transaction& t1 = s.t1;
        release_all_waiting(s, locked, context_id, result);
        if (locked.row.state == instance_state::open && locked.processed.contains_all(sequence_types)) close(t1, locked, context_id);
    }

    /// A release pass over every WAITING message of the locked instance, whatever made it ready.
    void release_all_waiting(scope& s, locked_instance& locked, const std::string& context_id, delivery_result& result) {
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

    // ---- operator actions ----

    std::size_t act_on(instance_id id) {
        const auto started = std::chrono::steady_clock::now();
        const std::size_t executed = act_on_locked(id);
        if constexpr (requires(std::chrono::nanoseconds d) { metrics_.action_executed(d); })
            if (executed > 0) metrics_.action_executed(std::chrono::steady_clock::now() - started);
        return executed;
    }

    /// The claims an action on a FAILED message needs (its claim was deleted when it failed).
    struct failed_claims {
        std::set<claim_key> attempted;
        std::set<claim_key> won;
    };

    std::size_t act_on_locked(instance_id id) {
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

    struct actions_run {
        std::size_t executed = 0;
        bool heal = false;  ///< a release pass is due (an OPEN instance not closed by a CLOSE)
        const std::vector<std::string>* types = nullptr;  ///< of the instance's sequence
    };

    void heal(scope& s, const sequence_instance& instance, const std::vector<std::string>& types) {
        delivery_result result{outcome::processed, {}, {}, instance.context_id, 0, 0};
        heal(s, instance.id, instance.context_id, types, result);
    }

    void heal_afresh(const sequence_instance& instance, const std::vector<std::string>& types) {
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
    failed_claims claim_failed_targets(transaction& t1, instance_id id) {
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
    actions_run execute(scope& s, const locked_instance& locked, pending_actions& actions, const failed_claims& claims) {
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
        std::size_t executed = consume_all || closing ? 1 : 0;
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
    std::vector<message_record> action_rows(transaction& t1, const locked_instance& locked, const pending_actions& actions, bool consume_all) {
        std::vector<message_id> ids;
        for (const auto& request : actions.on_messages) ids.push_back(request.message);
        std::vector<message_record> rows = t1.action_targets(locked.row.id, ids);
        if (consume_all)
            for (auto& row : t1.waiting_messages(locked.row.id, locked.waiting))
                if (!std::ranges::any_of(rows, [&](const message_record& r) { return r.id == row.id; })) rows.push_back(std::move(row));
        return detail::in_replay_order(std::move(rows), [&](const std::string& type) {
            const entry* e = catalog_.find(type);
            return e == nullptr ? nullptr : &e->dependents;
        });
    }

    static std::optional<message_action> own_request(message_id id, const pending_actions& actions) {
        for (const auto& request : actions.on_messages)
            if (request.message == id) return request.action;
        return std::nullopt;
    }

    /// One action on a row action_rows read. A FAILED row's key was claimed again before (so that
    /// a resend is a duplicate once it ran): its new state commits with that claim, and a replay
    /// that fails again deletes the claim.
    void run_action(scope& s, const message_record& row, message_action action, const std::string& context_id) {
        const bool failed = row.state == message_state::failed;
        scope here{s.t1, s.batch, failed};
        if (action == message_action::expire) expire(here, row, context_id);
        else if (!replay(here, row, {}, context_id) && failed) forget(here, here.t1, row.key());
    }

    /// EXPIRE: PROCESSED without replay.
    void expire(scope& s, const message_record& row, const std::string& context_id) {
        run_state(s, [&](transaction* tx) { tx->update_message_state(row.id, message_state::processed, clock_.now()); });
        decided(about(decision_kind::expired, row.type, row.idempotence_id, context_id));
    }

    /// Stores the delivery's row in the state step. A FAILED row of the key takes the new state
    /// instead of a second row (a release failure is stored on its own, so the transaction that
    /// released it may roll back its predecessor afterwards). Should T1's connection die before
    /// the step commits, a takeover of the claim and this step are serialised per key by the
    /// store, so one of them finds the other's row rather than adding a second.
    /// REQUIRES_NEW beside T1 is durable once T1 ends: its commit may flush both.
    void store_state(scope& s, const delivery& d, message_record row) {
        if (s.joined())
            warn_if_taken_over(s.t1.store_message(std::move(row)), d);
        else
            warn_if_taken_over(store_->store_message_beside(s.t1, std::move(row)), d);
    }

    /// The inbox state step: in T1 under `required` or in a batch, else in a transaction of its own.
    template <class Step>
    void run_state(scope& s, Step step) {
        if (s.joined())
            step(&s.t1);
        else
            propagation::requires_new::run(*store_, s.t1, step);
    }

    void warn_if_taken_over(stored_as what, const delivery& d) {
        if (what == stored_as::left_existing) warn_taken_over(describe(d));
    }

    void warn_if_taken_over(stored_as what, const claim_key& key) {
        if (what == stored_as::left_existing) warn_taken_over(detail::loggable_message(key.type, key.idempotence_id));
    }

    void warn_taken_over(const std::string& message) {
        log(log_level::warn, [&] {
            return "a takeover of the claim stored " + message + " first; its row is kept" +
                   " (the listener may have run twice: the documented at-least-once window)";
        });
    }

    /// `failed`: the key's rows, all FAILED; the newest takes the WAITING state (store_message).
    void buffer(scope& s, locked_instance& locked, const delivery& d, const std::vector<message_record>& failed, timestamp now) {
        message_record row = row_for(locked.row.id, d, message_state::waiting, now, true);
        if (s.batch != nullptr)
            locked.unstored.push_back({std::move(row), failed.empty() ? 0 : std::ranges::max(failed, {}, &message_record::id).id});
        else
            store_state(s, d, std::move(row));
    }

    /// The batch's end: what it buffered and did not release is stored WAITING.
    void store_unstored(scope& s, std::map<instance_id, locked_instance>& locked) {
        for (auto& [id, instance] : locked)
            for (auto& u : instance.unstored)
                if (!std::exchange(u.settled, true)) {
                    const claim_key key = u.row.key();
                    warn_if_taken_over(s.t1.store_message(std::move(u.row)), key);
                }
    }

    /// The listener threw on the direct path: FAILED, the claim gone (so that a resend retries),
    /// the error sink told. One delivery: FAILED in its own transaction, then the sink, then T1
    /// rolls back. In a batch: all in the batch's transaction, the sink after its commit.
    void fail(scope& s, instance_id instance, const delivery& d, const listener_fault& fault) {
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
        if (s.batch == nullptr) s.t1.rollback();
        decided(about(d, decision_kind::failed, reason));
    }

    /// Step 7: release what `type` (now PROCESSED) unblocks, then close the instance if complete.
    void after_processed(scope& s, const delivery& d, locked_instance& locked, const std::string& type, delivery_result& result) {
        transaction& t1 = s.t1;
        locked.processed.insert(type);
        if (!catalog_.find(type)->dependents.empty()) release(s, d, locked, type, result);
        if (locked.row.state == instance_state::open && locked.processed.contains_all(*d.type->sequence_types)) {
            // Every condition holds now: a message still WAITING (its release pass died with its
            // connection after its predecessor's state step committed) must not stay behind.
            release_all_waiting(s, locked, d.context_id, result);
            close(t1, locked, d.context_id);
        }
    }

    void release(scope& s, const delivery& d, locked_instance& locked, const std::string& type, delivery_result& result) {
        transaction& t1 = s.t1;
        detail::release_plan plan(condition_lookup(), locked.processed);
        detail::twin_rows twins;
        plan.mark_processed(type);
        fetch_dependents(t1, locked, plan, twins, type);
        run_release(s, d.context_id, locked, plan, twins, result);
    }

    std::function<const condition&(const std::string&)> condition_lookup() const {
        return [this](const std::string& t) -> const condition& { return catalog_.find(t)->declaration->release; };
    }

    void run_release(scope& s, const std::string& context_id, locked_instance& locked,
                     detail::release_plan& plan, detail::twin_rows& twins, delivery_result& result) {
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
    void fetch_dependents(transaction& t1, const locked_instance& locked, detail::release_plan& plan,
                          detail::twin_rows& twins, const std::string& type) {
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
    void close(transaction& t1, locked_instance& locked, const std::string& context_id) {
        locked.row.state = instance_state::closed;
        close(t1, locked.row.id, context_id);
    }

    void close(transaction& t1, instance_id instance, const std::string& context_id) {
        t1.close_instance(instance, clock_.now());
        decision event = about(decision_kind::closed, {}, {}, context_id);
        event.instance = instance;
        decided(event);
    }

    /// Replays a buffered message. On failure: error sink first, then FAILED and the claim
    /// deleted in one transaction, so a resend can retry and nothing is lost.
    bool replay(scope& s, const message_record& row, const std::vector<message_id>& twins, const std::string& context_id) {
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
            auto mark_failed = [&](transaction* tx) {
                set_state(*tx, row, twins, message_state::failed, clock_.now());
                forget(s, *tx, row.key());
            };
            // At once, even in a batch: no source brings a released message back, so a crash
            // between the commit and a later publication would lose it.
            sink_->publish({record, reason, row.type, row.idempotence_id, context_id, fault.kind});
            if (s.batch != nullptr)
                mark_failed(&t1);  // in the batch: the savepoint undid the listener's writes
            else
                propagation::requires_new::run(*store_, t1, mark_failed);
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

    /// A replayed row's new state, on its twins too; a row the batch did not store yet is stored
    /// once, in that state.
    void set_state(transaction& tx, const message_record& row, const std::vector<message_id>& twins, message_state state, timestamp now) {
        if (row.id == 0) {
            message_record settled = row;
            settled.state = state;
            settled.state_changed_at = now;
            warn_if_taken_over(tx.store_message(std::move(settled)), row.key());
            return;
        }
        for (message_id id : with_twins(row.id, twins)) tx.update_message_state(id, state, now);
    }

    static std::vector<message_id> with_twins(message_id id, std::vector<message_id> twins) {
        twins.insert(twins.begin(), id);
        return twins;
    }

    /// Under `required` the listener writes into T1, so a failing replay must undo only its own
    /// writes: a savepoint scopes them. A store error at the savepoint's bounds (a deferred write
    /// sent with it failed) is a store_fault: it fails the transaction with its own cause, and
    /// never counts as the listener's failure.
    void guarded_invoke(transaction& t1, const message_type& message, const envelope& record, const entry& type,
                        const std::string& idempotence_id, const std::string& context_id, bool replayed = true) {
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
    template <class Point>
    static void end_scope(transaction& t1, const Point& point) {
        if constexpr (requires { t1.release(point); }) t1.release(point);
    }

    /// A store error of the engine's own step beside a listener.
    struct store_fault : error {
        explicit store_fault(const error& e) : error(e) {}
    };

    template <class Step>
    static decltype(auto) store_step(transaction& t1, Step step) {
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
    void invoke(const message_type& message, const envelope& record, const entry& type, const std::string& idempotence_id,
                const std::string& context_id, bool replayed, transaction* t1) {
        const listener_fn& fn = listeners_.at(type.qualified);
        auto call = [&](transaction* tx) { fn(message, context{record, type.qualified, idempotence_id, context_id, replayed, tx}); };
        if (t1 == nullptr)
            call(nullptr);
        else
            Propagation::run(*store_, *t1, call);
        metrics_.consumed(type.qualified);
    }

    message_record row_for(instance_id instance, const delivery& d, message_state state, timestamp now, bool keep_payload) const {
        message_record row;
        row.instance = instance;
        row.type = d.type->qualified;
        row.idempotence_id = d.idempotence_id;
        row.state = state;
        row.created_at = now;
        row.state_changed_at = now;
        if (keep_payload) row.payload = d.record;
        return row;
    }

    /// Called while a listener failure is being handled: when T1 itself is gone (its connection
    /// was lost, perhaps under the listener's own statements), the message did not fail — the
    /// delivery did, so it must not be acknowledged but redelivered.
    /// Without T1 the claim and the instance lock are gone: nothing more may run or be stored.
    static void require_alive(transaction& t1, const std::string& type, const std::string& idempotence_id, const char* when) {
        if (!t1.active())
            throw error(error_category::connection, "the claim transaction lost its connection " + std::string(when) + " (" +
                                                        detail::loggable_message(type, idempotence_id) + "); not stored, redeliver");
    }

    static void require_connection(transaction& t1, const std::string& type, const std::string& idempotence_id) {
        if (!t1.active())
            throw error(error_category::connection, "the claim transaction of " + detail::loggable_message(type, idempotence_id) +
                                                        " lost its connection while the listener ran (" +
                                                        current_exception_text() + "); redeliver");
    }

    static listener_fault current_fault() {
        try {
            throw;
        } catch (const seqinbox::listener_failure& f) {
            return {std::string(to_string(f.kind())) + ": " + f.what(), f.kind()};
        } catch (...) {
            return {"listener failed: " + current_exception_text(), failure_kind::listener_failed};
        }
    }

    static listener_fault undecodable_on_replay() {
        return {"undecodable on replay: " + current_exception_text(), failure_kind::undecodable_on_replay};
    }

    static std::string describe(const delivery& d) { return detail::loggable_message(d.type->qualified, d.idempotence_id, d.context_id); }

    static decision about(decision_kind kind, std::string_view type, std::string_view idempotence_id, std::string_view context_id,
                          std::string_view reason = {}) {
        return {kind, type, idempotence_id, context_id, reason, rejection::none, outcome::not_sequenced, 0, {}};
    }

    static decision about(const delivery& d, decision_kind kind, std::string_view reason = {}) {
        return about(kind, d.type->qualified, d.idempotence_id, d.context_id, reason);
    }

    /// Every decision leaves the engine here: the metrics sink counts it, the logger reports it.
    void decided(const decision& e) {
        metrics::count(metrics_, e);
        logger::report(logger_, e);
    }

    template <class Build>
    void log(log_level level, Build build) {
        if (logger_.enabled(level)) logger_.log(level, build());
    }

    Store* store_;
    Source* source_;
    ErrorSink* sink_;
    detail::catalog<message_type> catalog_;
    Decoder decoder_;
    Clock clock_;
    Metrics metrics_;
    Logger logger_;
    std::unordered_map<std::string, listener_fn> listeners_;
    std::atomic<bool> ready_{false};
    std::mutex ready_mutex_;
};

}  // namespace seqinbox
