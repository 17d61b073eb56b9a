#pragma once
// basic_inbox's batches (deliver_batch, poll_batch): the records in parts the store's limits
// allow, each part decided in one transaction in rounds of claims, the WAITING rows its release
// passes may reach read ahead, and its effects (the error sink, deleted claims) deferred.
// Members of basic_inbox, declared in seqinbox/inbox.hpp, which includes this header at its end.
#include <algorithm>
#include <limits>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/inbox.hpp"

namespace seqinbox {

template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::max_batch_records() const {
    if constexpr (requires(const Store& st) { { st.max_batch_records(true) } -> std::convertible_to<std::size_t>; })
        return std::max<std::size_t>(1, store_->max_batch_records(Propagation::joins_claim_transaction));
    else
        return std::numeric_limits<std::size_t>::max();
}

template <class Store, class Source, class ErrorSink, class Policies>
std::vector<envelope> basic_inbox<Store, Source, ErrorSink, Policies>::take(std::size_t max) {
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
template <class Store, class Source, class ErrorSink, class Policies>
std::vector<std::span<const envelope>> basic_inbox<Store, Source, ErrorSink, Policies>::parts_of(std::span<const envelope> records) const {
    const std::size_t most = max_batch_records();
    std::vector<std::span<const envelope>> parts;
    for (std::size_t first = 0; first < records.size(); first += most)
        parts.push_back(records.subspan(first, std::min(most, records.size() - first)));
    return parts;
}

/// deliver_batch of one part, in one transaction.
template <class Store, class Source, class ErrorSink, class Policies>
std::vector<delivery_result> basic_inbox<Store, Source, ErrorSink, Policies>::deliver_part(std::span<const envelope> records,
                                                                                           const batch_hooks& hooks) {
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
template <class Store, class Source, class ErrorSink, class Policies>
struct basic_inbox<Store, Source, ErrorSink, Policies>::batch_item {
    std::size_t index;
    delivery d;
    instance_id instance = 0;
    std::optional<claim_result> claim{};
};

template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::classify_batch(std::span<const envelope> records, batch_effects& effects,
                                                                     std::vector<delivery_result>& results) -> std::vector<batch_item> {
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
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::sequence_batch(std::vector<batch_item>& items, std::vector<delivery_result>& results,
                                                                     const batch_hooks& hooks) -> batch_effects {
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

template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::context_of(const batch_item& item) -> context_key {
    return {item.d.type->sequence->name, item.d.context_id};
}

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
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::decide_rounds(scope& s, std::vector<batch_item*> pending,
                                                                    std::vector<delivery_result>& results, int attempt, timestamp now) {
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
            try {
                results[item->index] = decide_claimed(s, item->d, claim.won, instance, claim.rows, now);
            } catch (const error& e) {
                if (e.sqlstate() == buffer_full_sqlstate) throw detail::rejected_record(e, item->index);
                throw;
            }
            tried.insert(item->d.key());
        }
        pending = std::move(undecided);
    }
    store_unstored(s, locked);
    return true;
}

/// The instances of the round's won claims, as their claims locked them; one the batch holds
/// already keeps what its decisions made of it.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::hold_won(const std::vector<batch_item*>& round,
                                                               std::map<instance_id, locked_instance>& locked) {
    for (batch_item* item : round)
        if (item->claim->won && !locked.contains(item->instance)) locked.emplace(item->instance, held(std::move(item->claim->locked)));
}

/// The WAITING rows the batch's release passes may reach in the instances it holds, read at
/// once (detail/read_ahead.hpp): of the types that depend on a won delivery that does not
/// wait, and on those of them that may be processed too (rows waiting, or delivered in the
/// batch). What a release pass needs beyond them it asks the store for.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::read_ahead(transaction& t1, const std::vector<batch_item*>& round,
                                                                 const std::vector<batch_item*>& pending,
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
template <class Store, class Source, class ErrorSink, class Policies>
template <class Predicate>
std::set<std::string> basic_inbox<Store, Source, ErrorSink, Policies>::dependents_of(const std::string& type,
                                                                                     Predicate may_be_processed) const {
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
template <class Store, class Source, class ErrorSink, class Policies>
std::vector<std::vector<message_record>> basic_inbox<Store, Source, ErrorSink, Policies>::waiting_rows_of(
    transaction& t1, std::span<const waiting_query> queries) {
    if constexpr (requires { t1.waiting_messages(queries); }) {
        return t1.waiting_messages(queries);
    } else {
        std::vector<std::vector<message_record>> rows;
        for (const auto& q : queries) rows.push_back(t1.waiting_messages(q.instance, q.types));
        return rows;
    }
}

/// Every item's instance, unclaimed: in one call when the store can create many at once.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::resolve_instances(const std::vector<batch_item*>& all, timestamp now) {
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
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::claim_later_round(scope& s, const std::vector<batch_item*>& round, timestamp now) {
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
template <class Store, class Source, class ErrorSink, class Policies>
auto basic_inbox<Store, Source, ErrorSink, Policies>::to_claim(const std::vector<batch_item*>& pending, const std::set<claim_key>& tried,
                                                               const std::set<claim_key>& forgotten) -> std::vector<batch_item*> {
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
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::ready(const scope& s, batch_item& item) {
    if (!item.claim) return false;
    if (!s.batch->forgotten.contains(item.d.key())) return true;
    item.claim.reset();
    return false;
}

/// Claims `round`, each result kept with its delivery; false when the batch must start again
/// (an instance was removed or belongs to another context: the store forgets what it
/// remembered of them).
template <class Store, class Source, class ErrorSink, class Policies>
bool basic_inbox<Store, Source, ErrorSink, Policies>::claim_round(scope& s, const std::vector<batch_item*>& round, timestamp now,
                                                                  int attempt) {
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

template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::acknowledge(std::span<const envelope> part, std::vector<delivery_result>& decided,
                                                                  std::vector<delivery_result>& results) {
    for (const auto& record : part) source_->acknowledge(record);
    std::ranges::move(decided, std::back_inserter(results));
}

/// A redelivering source gets the records from `from` on back, last first (so that it ends at `from`).
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::give_back(const std::vector<envelope>& records, const envelope* from) {
    if constexpr (redelivering_source<Source>)
        for (auto it = records.rbegin(); it != records.rend() && &*it >= from; ++it) source_->redeliver(*it);
}

/// A full buffer rejected the part's record `rejected`: the records before it, decided again in
/// a transaction of their own (again shorter should a full buffer reject one of them), are
/// acknowledged, so that a retry while the buffer stays full does not run their listeners each
/// time; they ran in the rolled-back attempt too (the at-least-once window of a batch that does
/// not commit), once. Returns how many were acknowledged; on another failure gives the part back.
template <class Store, class Source, class ErrorSink, class Policies>
std::size_t basic_inbox<Store, Source, ErrorSink, Policies>::decide_before_rejection(const std::vector<envelope>& records,
                                                                                     std::span<const envelope> part, std::size_t rejected,
                                                                                     const batch_hooks& hooks,
                                                                                     std::vector<delivery_result>& results) {
    try {
        while (rejected > 0) {
            try {
                auto decided = deliver_part(part.first(rejected), hooks);
                acknowledge(part.first(rejected), decided, results);
                return rejected;
            } catch (const detail::rejected_record& again) {
                rejected = again.index;
            }
        }
        return 0;
    } catch (...) {
        give_back(records, part.data());
        throw;
    }
}

/// The batch's end: what it buffered and did not release is stored WAITING.
template <class Store, class Source, class ErrorSink, class Policies>
void basic_inbox<Store, Source, ErrorSink, Policies>::store_unstored(scope& s, std::map<instance_id, locked_instance>& locked) {
    for (auto& [id, instance] : locked)
        for (auto& u : instance.unstored)
            if (!std::exchange(u.settled, true)) {
                const claim_key key = u.row.key();
                warn_if_taken_over(s.t1.store_message(std::move(u.row)), key);
            }
}

}  // namespace seqinbox
