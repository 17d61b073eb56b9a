#pragma once
// The invariants on the store: checked after every step that committed (no duplicate row per
// claim key) and at quiescence (every delivered logical message ended in an accepted state and
// its listener succeeded once, or more only after the documented at-least-once window).
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "listener_probe.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/model.hpp"
#include "violation.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

/// No claim key has more than one committed sequenced message; each key is reported once. A
/// key whose listener was orphaned by a lost connection (the documented at-least-once window)
/// is reported under its own kind, so that this known consequence stays visible but separate.
class unique_rows_check {
public:
    void run(const memory::store& store, const listener_probe& probe, violation_log& log) {
        std::map<claim_key, std::size_t> rows;
        for (const auto& row : store.messages()) {
            const claim_key key = row.key();
            if (++rows[key] != 2 || !reported_.insert(key).second) continue;
            log.add(probe.had_window(key) ? "duplicate_row_after_window" : "duplicate_row",
                    "two committed inbox rows for " + listener_probe::text(key));
        }
    }

private:
    std::set<claim_key> reported_;
};

struct final_state_inputs {
    const memory::store& store;
    const memory::error_sink& sink;
    const listener_probe& probe;
    const declarations<testing::message>& decls;
    bool strategy_claims;  ///< false for strategies that never write a claim (no live-claim check)
    bool connection_lost;  ///< a connection died in this run (a release pass may have been cut)
};

class final_state_check {
public:
    final_state_check(const final_state_inputs& in, violation_log& log) : in_(in), log_(&log) {
        for (const auto& f : in.sink.records()) sunk_.insert({f.qualified_type, f.idempotence_id});
        for (const auto& m : in.decls.sequences.front().messages) release_.emplace(m.qualified_type(), &m.release);
        for (const auto& row : in.store.messages())
            if (row.state == message_state::processed) processed_[row.instance].insert(row.type);
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
        if (rows.empty()) return log_->add("lost", name + " was delivered but has no inbox row");
        if (rows.size() > 1) return;  // reported by unique_rows_check; the state is ambiguous
        check_successes(key, name, rows.front().state);
        switch (rows.front().state) {
        case message_state::processed: return;
        case message_state::failed:
            if (!sunk_.contains(key)) log_->add("failed_not_in_sink", name + " is FAILED without an error-sink record");
            return;
        case message_state::waiting: return check_waiting(rows.front(), name);
        }
    }

    void check_successes(const claim_key& key, const std::string& name, message_state state) {
        const std::size_t n = in_.probe.successes(key);
        const std::size_t expected = state == message_state::processed ? 1 : 0;
        if (n == expected || (n > expected && in_.probe.had_window(key))) return;
        log_->add(n > expected ? "listener_repeated" : "processed_without_listener",
                  name + " is " + std::string(to_string(state)) + " and its listener succeeded " + std::to_string(n) + " times");
    }

    void check_waiting(const message_record& row, const std::string& name) {
        if (in_.strategy_claims && !in_.store.has_claim(row.key()))
            log_->add("waiting_without_claim", name + " is WAITING without a committed claim");
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
};

}  // namespace seqinbox::sim
