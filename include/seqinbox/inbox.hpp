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
//
// Layout: this header holds the class, its public API and the course of one delivery (decide,
// sequence, decide_claimed); the other members are declared in the class, one group per part,
// and defined in the part's header, which this one includes at its end: seqinbox/detail/
// inbox_classify.hpp (steps 1 and 2), inbox_steps.hpp (the claim and the state steps),
// inbox_listeners.hpp (listeners, savepoints), inbox_release.hpp (release passes, closing),
// inbox_batch.hpp (batches: parts, rounds, read-ahead, effects), inbox_actions.hpp (operator
// actions). The engine's data types are in detail/locked_instance.hpp and detail/batch_effects.hpp.
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
#include "seqinbox/detail/batch_effects.hpp"
#include "seqinbox/detail/catalog.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/detail/locked_instance.hpp"
#include "seqinbox/detail/numbered_instance.hpp"
#include "seqinbox/detail/release_plan.hpp"
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
#include "seqinbox/store/housekeeping.hpp"
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
    /// of them) and this rethrows. A part a full buffer rejected (overflow_policy::reject) keeps
    /// the records before the rejected one: decided again alone, acknowledged, not given back.
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
            } catch (const detail::rejected_record& rejected) {
                give_back(records, part.data() + decide_before_rejection(records, part, rejected.index, hooks, results));
                throw;
            } catch (...) {
                give_back(records, part.data());
                throw;
            }
            acknowledge(part, decided, results);
        }
        return results;
    }

    /// The most records one batch transaction decides: what the store's limits allow (see its
    /// max_batch_records), unlimited for a store without any.
    std::size_t max_batch_records() const;  // detail/inbox_batch.hpp

    /// The context id `record` would be sequenced under; nothing when it would not be
    /// (undecodable, unknown type, filtered out, no context id). No effect: for callers that
    /// spread records over threads by context (the relay). Defined in detail/inbox_classify.hpp.
    std::optional<std::string> context_id_of(const envelope& record) const noexcept;

    /// Executes pending operator actions (docs/operations.md): up to `pages` pages of `page_size` instances,
    /// each in one transaction under its instance lock, then a release pass and closing where
    /// complete. Returns how many actions ran. Several service instances may run it at once.
    std::size_t run_pending_actions(std::size_t page_size = 100, std::size_t pages = 10)
        requires action_store<Store>;

    /// Gap timeouts of numbered sequences (README, "Numbered sequences"), up to `pages` pages of
    /// `page_size` instances per sequence, each run going on where the last stopped. Returns how
    /// many gaps timed out. Several service instances may run it at once. detail/inbox_gaps.hpp.
    std::size_t run_gap_timeouts(std::size_t page_size = 100, std::size_t pages = 10)
        requires housekeeping_store<Store>;

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

    using batch_effects = detail::batch_effects;

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
        std::optional<std::int64_t> number{};  ///< in a numbered sequence (detail/inbox_numbered.hpp)
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

    static std::string_view metric_type(const delivery_result& r) { return metric_label(r.qualified_type, r.rejection); }

    using unstored_row = detail::unstored_row;
    using locked_instance = detail::locked_instance<transaction>;

    static locked_instance lock(transaction& t1, instance_id instance) { return held(t1.lock_instance(instance)); }

    static locked_instance held(instance_lock lock) {
        return {std::move(lock.row), detail::processed_set(std::move(lock.types.processed)), std::move(lock.types.waiting), {}, {}, lock.types.waiting_rows};
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
        const bool numbered = d.number && !recording(*d.type->sequence, now);
        const numbering_rules& rules = d.type->sequence->numbering;
        if (numbered)
            if (const char* why = detail::number_duplicate(t1, locked, rules, *d.number)) return skipped(d, result, why);
        if (numbered ? detail::waits_for_number(t1, locked, rules, *d.number) : waits(d, locked, now)) {
            if (overflowed(s, locked, d, result)) return result;
            if (auto problem = buffer(s, locked, d, existing, now); !problem.empty()) {
                fail(s, instance, d, {"the store cannot buffer the record: " + problem, failure_kind::unstorable_key});
                result.outcome = outcome::failed;
                return result;
            }
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
            fail(s, instance, d, current_fault(), locked.started_here);  // the kind and text of the exception being handled
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

    /// A store error of the engine's own step beside a listener.
    struct store_fault : error {
        explicit store_fault(const error& e) : error(e) {}
    };

    message_record row_for(instance_id instance, const delivery& d, message_state state, timestamp now, bool keep_payload) const {
        message_record row;
        row.instance = instance;
        row.type = d.type->qualified;
        row.idempotence_id = d.idempotence_id;
        row.state = state;
        row.created_at = now;
        row.state_changed_at = now;
        if (keep_payload) row.payload = d.record;
        row.number = d.number;
        return row;
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

    // ---- steps 1 and 2: classification, the unsequenced path (detail/inbox_classify.hpp) ----
    std::variant<delivery_result, delivery> classify(const envelope& record, batch_effects* batch);
    static std::string unstorable(const delivery& d);
    static std::string unknown_type_reason(const std::string& type, const std::string& qualified);
    static std::string no_number_reason(const entry& type, std::optional<std::int64_t> number);
    delivery_result reject(batch_effects* batch, const envelope& record, rejection why, std::string reason, std::string type,
                           std::string idempotence_id, std::optional<failure_kind> kind = std::nullopt);
    static constexpr failure_kind kind_of(rejection why) noexcept;
    static bool handles_without_context_id(const delivery& d);
    delivery_result reject_without_context_id(batch_effects* batch, delivery& d);
    delivery_result handle_directly(batch_effects* batch, delivery& d);

    // ---- steps 3 to 7 around decide_claimed: claim, duplicate, buffer, state, failure (detail/inbox_steps.hpp) ----
    struct claim_attempt;
    claim_attempt acquire_claim(const delivery& d, timestamp now);
    std::optional<claim_result> try_claim(transaction& t1, const delivery& d, instance_id instance, timestamp now, int attempt);
    void reclaim_after_mismatch(const delivery& d, const sequence_instance& locked, int attempt);
    bool failed_meanwhile(transaction& t1, const claim_key& key, const std::vector<message_record>& seen);
    delivery_result& skipped(const delivery& d, delivery_result& result, const char* why);
    void store_state(scope& s, const delivery& d, message_record row);
    template <class Step>
    void run_state(scope& s, Step step);
    void warn_if_taken_over(stored_as what, const delivery& d);
    void warn_if_taken_over(stored_as what, const claim_key& key);
    void warn_taken_over(const std::string& message);
    std::string buffer(scope& s, locked_instance& locked, const delivery& d, const std::vector<message_record>& failed, timestamp now);
    std::string buffering_problem(const message_record& row) const;
    void fail(scope& s, instance_id instance, const delivery& d, const listener_fault& fault, bool keep_start = false);
    void after_processed(scope& s, const delivery& d, locked_instance& locked, const std::string& type, delivery_result& result);

    // ---- bounded buffers: the overflow policies (detail/inbox_overflow.hpp) ----
    bool overflowed(scope& s, locked_instance& locked, const delivery& d, delivery_result& result);
    static std::string overflow_reason(const locked_instance& locked, const delivery& d, std::size_t limit);
    std::optional<std::int64_t> dead_letter_waiting(scope& s, locked_instance& locked, const std::string& context_id,
                                                    const std::string& reason, failure_kind kind);

    // ---- numbered sequences: releases, gap timeouts (detail/inbox_numbered.hpp, numbered_instance.hpp, inbox_gaps.hpp) ----
    void release_numbered(scope& s, locked_instance& locked, const numbering_rules& rules, const std::string& context_id, delivery_result& result);
    const numbering_rules* numbering_of(const std::string& sequence) const;
    bool resolve_gap(instance_id id, const sequence_declaration<message_type>& seq, timestamp now);
    scan_position gap_scan_start(const std::string& sequence);
    void gap_scan_stop(const std::string& sequence, scan_position at);
    void apply_gap_policy(scope& s, locked_instance& locked, const sequence_declaration<message_type>& seq, std::int64_t first_waiting);

    // ---- listeners: propagation, savepoints, what a failure means (detail/inbox_listeners.hpp) ----
    void invoke_direct(scope& s, const delivery& d);
    void guarded_invoke(transaction& t1, const message_type& message, const envelope& record, const entry& type,
                        const std::string& idempotence_id, const std::string& context_id, bool replayed = true);
    template <class Point>
    static void end_scope(transaction& t1, const Point& point);
    template <class Step>
    static decltype(auto) store_step(transaction& t1, Step step);
    void invoke(const message_type& message, const envelope& record, const entry& type, const std::string& idempotence_id,
                const std::string& context_id, bool replayed, transaction* t1);
    static void require_alive(transaction& t1, const std::string& type, const std::string& idempotence_id, const char* when);
    static void require_connection(transaction& t1, const std::string& type, const std::string& idempotence_id);
    static listener_fault current_fault();
    static listener_fault undecodable_on_replay();

    // ---- release passes, healing, closing (detail/inbox_release.hpp) ----
    void heal(scope& s, instance_id instance, const std::string& context_id, const std::vector<std::string>& sequence_types,
              delivery_result& result);
    void heal_locked(scope& s, locked_instance& locked, const std::string& context_id,
                     const std::vector<std::string>& sequence_types, delivery_result& result);
    void release_all_waiting(scope& s, locked_instance& locked, const std::string& context_id, delivery_result& result);
    void release(scope& s, const delivery& d, locked_instance& locked, const std::string& type, delivery_result& result);
    std::function<const condition&(const std::string&)> condition_lookup() const;
    void run_release(scope& s, const std::string& context_id, locked_instance& locked,
                     detail::release_plan& plan, detail::twin_rows& twins, delivery_result& result);
    void fetch_dependents(transaction& t1, const locked_instance& locked, detail::release_plan& plan,
                          detail::twin_rows& twins, const std::string& type);
    void close(transaction& t1, locked_instance& locked, const std::string& context_id);
    void close(transaction& t1, instance_id instance, const std::string& context_id);
    bool replay(scope& s, const message_record& row, const std::vector<message_id>& twins, const std::string& context_id);
    template <class TwinsOf>
    void fail_buffered(scope& s, std::span<const message_record> rows, TwinsOf twins_of);
    void set_state(transaction& tx, const message_record& row, const std::vector<message_id>& twins, message_state state, timestamp now);
    static std::vector<message_id> with_twins(message_id id, std::vector<message_id> twins);

    // ---- batches: parts, rounds, read-ahead, effects (detail/inbox_batch.hpp) ----
    using context_key = std::pair<std::string, std::string>;  ///< sequence, context id
    std::vector<envelope> take(std::size_t max);
    std::vector<std::span<const envelope>> parts_of(std::span<const envelope> records) const;
    std::vector<delivery_result> deliver_part(std::span<const envelope> records, const batch_hooks& hooks);
    struct batch_item;
    std::vector<batch_item> classify_batch(std::span<const envelope> records, batch_effects& effects, std::vector<delivery_result>& results);
    batch_effects sequence_batch(std::vector<batch_item>& items, std::vector<delivery_result>& results, const batch_hooks& hooks);
    static context_key context_of(const batch_item& item);
    bool decide_rounds(scope& s, std::vector<batch_item*> pending, std::vector<delivery_result>& results, int attempt, timestamp now);
    static void hold_won(const std::vector<batch_item*>& round, std::map<instance_id, locked_instance>& locked);
    void read_ahead(transaction& t1, const std::vector<batch_item*>& round, const std::vector<batch_item*>& pending,
                    std::map<instance_id, locked_instance>& locked, timestamp now);
    template <class Predicate>
    std::set<std::string> dependents_of(const std::string& type, Predicate may_be_processed) const;
    static std::vector<std::vector<message_record>> waiting_rows_of(transaction& t1, std::span<const waiting_query> queries);
    void resolve_instances(const std::vector<batch_item*>& all, timestamp now);
    bool claim_later_round(scope& s, const std::vector<batch_item*>& round, timestamp now);
    static std::vector<batch_item*> to_claim(const std::vector<batch_item*>& pending, const std::set<claim_key>& tried,
                                             const std::set<claim_key>& forgotten);
    static bool ready(const scope& s, batch_item& item);
    bool claim_round(scope& s, const std::vector<batch_item*>& round, timestamp now, int attempt);
    void store_unstored(scope& s, std::map<instance_id, locked_instance>& locked);
    void acknowledge(std::span<const envelope> part, std::vector<delivery_result>& decided, std::vector<delivery_result>& results);
    void give_back(const std::vector<envelope>& records, const envelope* from);
    std::size_t decide_before_rejection(const std::vector<envelope>& records, std::span<const envelope> part, std::size_t rejected,
                                        const batch_hooks& hooks, std::vector<delivery_result>& results);

    // ---- operator actions (detail/inbox_actions.hpp) ----
    std::size_t act_on(instance_id id);
    struct failed_claims;
    std::size_t act_on_locked(instance_id id);
    struct actions_run;
    void heal(scope& s, const sequence_instance& instance, const std::vector<std::string>& types);
    void heal_afresh(const sequence_instance& instance, const std::vector<std::string>& types);
    failed_claims claim_failed_targets(transaction& t1, instance_id id);
    actions_run execute(scope& s, const locked_instance& locked, pending_actions& actions, const failed_claims& claims);
    std::vector<message_record> action_rows(transaction& t1, const locked_instance& locked, const pending_actions& actions, bool consume_all);
    static std::optional<message_action> own_request(message_id id, const pending_actions& actions);
    void run_action(scope& s, const message_record& row, message_action action, const std::string& context_id);
    void expire(scope& s, const message_record& row, const std::string& context_id);
    void skip_gap(transaction& t1, const sequence_instance& instance);

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
    std::map<std::string, scan_position> gap_scans_;  ///< run_gap_timeouts' place per sequence
    std::mutex gap_scans_mutex_;
};
}  // namespace seqinbox

#include "seqinbox/detail/inbox_classify.hpp"
#include "seqinbox/detail/inbox_steps.hpp"
#include "seqinbox/detail/inbox_overflow.hpp"
#include "seqinbox/detail/inbox_numbered.hpp"
#include "seqinbox/detail/inbox_gaps.hpp"
#include "seqinbox/detail/inbox_listeners.hpp"
#include "seqinbox/detail/inbox_release.hpp"
#include "seqinbox/detail/inbox_batch.hpp"
#include "seqinbox/detail/inbox_actions.hpp"
