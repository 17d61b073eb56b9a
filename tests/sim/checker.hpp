#pragma once
// The invariants on the store: checked after every step that committed (no duplicate row per
// claim key), after every step (nothing lost; what housekeeping removed reached the error sink)
// and at quiescence (every delivered logical message ended in an accepted state and its listener
// succeeded once, or more only after the documented at-least-once window).
#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "listener_probe.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"
#include "seqinbox/store/model.hpp"
#include "violation.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

/// No claim key has more than one committed sequenced message; each key is reported once. A
/// key whose listener was orphaned by a lost connection (the documented at-least-once window)
/// is reported under its own kind, so that this known consequence stays visible but separate.
class unique_rows_check {
public:
    /// `stored`: the store's committed messages.
    void run(const std::vector<message_record>& stored, const listener_probe& probe, violation_log& log) {
        std::map<claim_key, std::size_t> rows;
        for (const auto& row : stored) {
            const claim_key key = row.key();
            if (++rows[key] != 2 || !reported_.insert(key).second) continue;
            log.add(probe.had_window(key) ? "duplicate_row_after_window" : "duplicate_row",
                    "two committed inbox rows for " + listener_probe::text(key));
        }
    }

private:
    std::set<claim_key> reported_;
};

/// No message is stored in an instance of another context (defect 1 of issue 17: after a crash
/// rolled the instance ids back, a process's cached id named another context's instance). Checked
/// after every step that ended a transaction and at quiescence; each key is reported once.
class own_instance_check {
public:
    explicit own_instance_check(const workload& w) {
        for (const auto& m : w.messages) context_of_.emplace(m.key(), m.context);
    }

    /// `stored`: the store's committed messages.
    void run(const memory::store& store, const std::vector<message_record>& stored, violation_log& log) {
        std::map<instance_id, std::string> instance_context;
        for (const auto& i : store.instances()) instance_context.emplace(i.id, i.context_id);
        for (const auto& row : stored) {
            const auto own = context_of_.find(row.key());
            const auto held = instance_context.find(row.instance);
            if (own == context_of_.end() || held == instance_context.end() || held->second == own->second) continue;
            if (reported_.insert(row.key()).second)
                log.add("foreign_instance", listener_probe::text(row.key()) + " of " + own->second + " is stored in instance " +
                                                std::to_string(row.instance) + " of " + held->second);
        }
    }

private:
    std::map<claim_key, std::string> context_of_;
    std::set<claim_key> reported_;
};

/// The error-sink records by claim key, caught up with the sink when asked.
class sink_index {
public:
    void catch_up(const memory::error_sink& sink) {
        if (sink.size() == seen_) return;
        const auto records = sink.records();
        for (; seen_ < records.size(); ++seen_) ++count_[{records[seen_].qualified_type, records[seen_].idempotence_id}];
    }
    std::size_t count(const claim_key& key) const {
        auto it = count_.find(key);
        return it == count_.end() ? 0 : it->second;
    }
    bool contains(const claim_key& key) const { return count_.contains(key); }

private:
    std::size_t seen_ = 0;
    std::map<claim_key, std::size_t> count_;
};

inline bool any_processed(const std::vector<message_record>& rows) {
    return std::ranges::any_of(rows, [](const message_record& r) { return r.state == message_state::processed; });
}

/// Nothing lost (docs/guarantees.md): every accepted (acknowledged) message had its listener succeed,
/// was expired by an operator, is stored, or reached the error sink (failed, forwarded by
/// housekeeping removal, or dead-lettered by a full buffer: FAILED, no claim, a resend retries).
/// Checked after every step; a message settled by one of the lasting reasons (all but "stored")
/// is not looked at again.
class nothing_lost_check {
public:
    void accept(const claim_key& key) {
        if (!settled_.contains(key)) open_.insert(key);
    }
    /// Numbered seeds: whether a key without a row was skipped as a duplicate of its number.
    void settle_skipped_numbers(std::function<bool(const claim_key&)> skipped) { skipped_number_ = std::move(skipped); }

    void run(const memory::store& store, const sink_index& sink, const listener_probe& probe, violation_log& log) {
        // An expiry settles its key before any copy of it is acknowledged too: housekeeping may
        // remove the instance (and forget the expiry) before a redelivered duplicate's ack.
        for (const auto& key : probe.expire_targets())
            if (any_processed(store.messages_with_key(key))) settled_.insert(key);
        for (auto it = open_.begin(); it != open_.end();) {
            if (settled(*it, store, sink, probe)) {
                settled_.insert(*it);
                it = open_.erase(it);
                continue;
            }
            if (!store.messages_with_key(*it).empty() || !reported_.insert(*it).second) {
                ++it;
                continue;
            }
            log.add("lost", listener_probe::text(*it) + " was accepted but its listener never succeeded, no operator expired it, " +
                                "it is not stored and it is not in the error sink");
            ++it;
        }
    }

private:
    bool settled(const claim_key& key, const memory::store& store, const sink_index& sink, const listener_probe& probe) const {
        // First, so that a numbered seed notes the skip before housekeeping may remove its cause.
        if (skipped_number_ && store.messages_with_key(key).empty() && skipped_number_(key)) return true;
        if (probe.ever_succeeded(key) || sink.contains(key)) return true;
        return probe.expire_target(key) && any_processed(store.messages_with_key(key));
    }

    std::set<claim_key> open_;
    std::set<claim_key> settled_;
    std::set<claim_key> reported_;
    std::function<bool(const claim_key&)> skipped_number_;
};

/// An instance housekeeping removed, with the keys of the rows it held.
struct removed_instance {
    std::string context;
    std::vector<claim_key> keys;
};

/// What housekeeping removes reaches the error sink first (docs/operations.md, housekeeping): around a housekeeper's
/// step, every WAITING row of an instance that vanished has a new error-sink record.
class removal_check {
public:
    void before(const memory::store& store, const sink_index& sink) {
        instances_ = store.instances();
        rows_ = store.messages();
        sunk_before_.clear();
        for (const auto& row : rows_)
            if (row.state == message_state::waiting) sunk_before_[row.key()] = sink.count(row.key());
    }

    std::vector<removed_instance> after(const memory::store& store, const sink_index& sink, violation_log& log) const {
        std::set<instance_id> present;
        for (const auto& i : store.instances()) present.insert(i.id);
        std::vector<removed_instance> removed;
        for (const auto& instance : instances_)
            if (!present.contains(instance.id)) removed.push_back(check_removed(instance, sink, log));
        return removed;
    }

private:
    removed_instance check_removed(const sequence_instance& instance, const sink_index& sink, violation_log& log) const {
        removed_instance gone{instance.context_id, {}};
        for (const auto& row : rows_) {
            if (row.instance != instance.id) continue;
            gone.keys.push_back(row.key());
            if (row.state == message_state::waiting && sink.count(row.key()) <= sunk_before_.at(row.key()))
                log.add("removed_without_forwarding", listener_probe::text(row.key()) + " was WAITING in " + instance.context_id +
                                                          " when housekeeping removed it, and did not reach the error sink");
        }
        return gone;
    }

    std::vector<sequence_instance> instances_;
    std::vector<message_record> rows_;
    std::map<claim_key, std::size_t> sunk_before_;
};

struct final_state_inputs {
    const memory::store& store;
    const memory::error_sink& sink;
    const listener_probe& probe;
    const declarations<testing::message>& decls;
    bool strategy_claims;  ///< false for strategies that never write a claim (no live-claim check)
    bool connection_lost;  ///< a connection died (or the database crashed) in this run: a release pass may have been cut
    const std::set<claim_key>& removed;  ///< keys whose instance housekeeping removed at some point
    /// Keys of deliveries still in a source, not acknowledged: a full buffer's `reject` left them
    /// there (the consumer backed off and nothing changed since), as a partition waits in Kafka.
    const std::set<claim_key>& in_source;
    /// Numbered seeds: a key without a row skipped as a duplicate of its number (numbered_checks.hpp);
    /// their WAITING rows are judged by check_waiting_numbers rather than by release conditions.
    std::function<bool(const claim_key&)> skipped_number{};
};

class final_state_check {
public:
    final_state_check(const final_state_inputs& in, violation_log& log) : in_(in), log_(&log) {
        for (const auto& f : in.sink.records()) sunk_.insert({f.qualified_type, f.idempotence_id});
        for (const auto& m : in.decls.sequences.front().messages) release_.emplace(m.qualified_type(), &m.release);
        for (const auto& row : in.store.messages())
            if (row.state == message_state::processed) processed_[row.instance].insert(row.type);
        for (const auto& instance : in.store.instances())
            if (instance.state == instance_state::closed) closed_.insert(instance.id);
    }

    void run(const workload& w, const std::vector<bool>& delivered) {
        if (in_.store.open_transaction_count() != 0)
            log_->add("open_transaction", std::to_string(in_.store.open_transaction_count()) + " transactions open at quiescence");
        for (std::size_t m = 0; m < w.messages.size(); ++m)
            if (delivered[m]) check_message(w.messages[m]);
    }

private:
    void check_message(const logical_message& m) {
        const claim_key key = m.key();
        const auto rows = in_.store.messages_with_key(key);
        const std::string name = listener_probe::text(key) + " (" + m.context + ")";
        if (rows.empty()) {
            if (in_.skipped_number && in_.skipped_number(key)) return;
            if (!in_.removed.contains(key) && !in_.in_source.contains(key)) log_->add("lost", name + " was delivered but has no inbox row");
            return;  // else removed by housekeeping: nothing_lost_check covered it at every step
        }
        if (rows.size() > 1) return;  // reported by unique_rows_check; the state is ambiguous
        check_successes(key, name, rows.front().state);
        switch (rows.front().state) {
        case message_state::processed: return check_processed(rows.front(), name);
        case message_state::failed:
            if (!sunk_.contains(key)) log_->add("failed_not_in_sink", name + " is FAILED without an error-sink record");
            return;
        case message_state::waiting: return check_waiting(rows.front(), m.context, name);
        }
    }

    void check_successes(const claim_key& key, const std::string& name, message_state state) {
        const std::size_t n = in_.probe.successes(key);
        const std::size_t expected = state == message_state::processed ? 1 : 0;
        if (n == expected || (n > expected && in_.probe.had_window(key))) return;
        if (n == 0 && state == message_state::processed && in_.probe.expire_target(key)) return;  // EXPIRE: never replayed
        log_->add(n > expected ? "listener_repeated" : "processed_without_listener",
                  name + " is " + std::string(to_string(state)) + " and its listener succeeded " + std::to_string(n) + " times");
    }

    /// A crash can keep a state step and lose its claim transaction; the redelivery heals that
    /// (writes the claim, releases the successors).
    void check_processed(const message_record& row, const std::string& name) {
        if (in_.strategy_claims && !memory::testing::has_claim(in_.store, row.key()))
            log_->add("processed_without_claim", name + " is PROCESSED without a committed claim");
    }

    void check_waiting(const message_record& row, const std::string& context, const std::string& name) {
        if (in_.strategy_claims && !memory::testing::has_claim(in_.store, row.key()))
            log_->add("waiting_without_claim", name + " is WAITING without a committed claim");
        // An operator's CLOSE releases nothing: the row waits until housekeeping forwards it at
        // the end of the instance's deduplication window (checked by the removal check).
        if ((closed_.contains(row.instance) && in_.probe.close_target(context)) || in_.skipped_number) return;
        const auto& done = processed_[row.instance];
        if (release_.at(row.type)->satisfied([&](const std::string& t) { return done.contains(t); }))
            log_->add(in_.connection_lost ? "stranded_after_lost_connection" : "stranded",
                      name + " is WAITING although its condition holds and nothing is in flight");
    }

    final_state_inputs in_;
    violation_log* log_;
    std::set<claim_key> sunk_;
    std::map<std::string, const condition*> release_;
    std::map<instance_id, std::set<std::string>> processed_;
    std::set<instance_id> closed_;
};

}  // namespace seqinbox::sim
