#pragma once
// The checks of numbered sequences (README, "Numbered sequences"; tests/sim/README.md):
//  - a listener the engine releases (not an operator's replay) gets the number after the
//    highest one released or skipped: what is committed, or completed in its own delivery
//    (number_released_again below it, number_released_after_gap above it);
//  - no number completes in two keys' listeners of one context (number_completed_twice);
//  - a number sent and not stored was skipped: released or skipped through, below the first
//    number, or another key holds it; else nothing_lost and the final check report it lost;
//  - at quiescence an instance's lowest WAITING number lies behind a missing number.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/store/model.hpp"
#include "seqinbox/store/views.hpp"
#include "violation.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

/// The highest number released or skipped through in the context's instance, committed.
using last_released_fn = std::function<std::optional<std::int64_t>(const std::string& context)>;

/// The workload's numbers and what the listeners of numbered messages did, per context.
class numbered_watch {
public:
    numbered_watch(const workload& w, const declarations<testing::message>& d) {
        const auto& seq = d.sequences.front();
        active_ = seq.numbered();
        first_ = seq.numbering.first_number;
        for (const auto& m : w.messages) {
            if (m.number) number_.emplace(m.key(), *m.number);
            context_.emplace(m.key(), m.context);
        }
    }

    bool active() const noexcept { return active_; }
    std::optional<std::int64_t> first_number() const { return first_; }
    std::optional<std::int64_t> number(const claim_key& key) const {
        auto it = number_.find(key);
        return it == number_.end() ? std::nullopt : std::optional(it->second);
    }
    const std::string& context(const claim_key& key) const { return context_.at(key); }

    /// A released listener of `key` starts: `floor` is the highest number released or skipped
    /// that it may know of; `may_jump` excuses a gap (an uncommitted skip ahead of it).
    void check_start(const claim_key& key, std::optional<std::int64_t> floor, bool may_jump, bool window, violation_log& log) const {
        const auto n = number(key);
        const std::optional<std::int64_t> expected = floor ? std::optional(*floor + 1) : first_;
        if (!n || !expected || *n == *expected) return;
        const std::string what = "listener of " + key.type + "/" + key.idempotence_id + " (number " + std::to_string(*n) + ", " + context(key) + ")";
        if (*n < *expected && !window)
            log.add("number_released_again", what + " started although " + std::to_string(*expected - 1) + " was released or skipped already");
        else if (*n > *expected && !may_jump)
            log.add("number_released_after_gap", what + " started while " + std::to_string(*expected) + " was neither released nor skipped");
    }

    /// A listener succeeded; operators' replays are not the engine's releases.
    void succeeded(const claim_key& key, bool operator_replay) {
        const auto n = number(key);
        if (n && !operator_replay) completed_[context(key)][*n].insert(key);
    }

    /// Housekeeping removed the context's instance: its numbers start over.
    void instance_removed(const std::string& context) { completed_.erase(context); }

    /// At quiescence: no number completed in two keys, but for keys in the at-least-once window.
    template <class HadWindow>
    void check_completed_once(HadWindow had_window, violation_log& log) const {
        for (const auto& [context, numbers] : completed_)
            for (const auto& [n, keys] : numbers) {
                std::vector<claim_key> plain;
                std::ranges::copy_if(keys, std::back_inserter(plain), [&](const claim_key& k) { return !had_window(k); });
                if (plain.size() > 1)
                    log.add("number_completed_twice", "number " + std::to_string(n) + " of " + context + ": the listeners of " +
                                                          std::to_string(plain.size()) + " keys succeeded");
            }
    }

    /// A numbered message without a row was skipped as a duplicate of its number: released or
    /// skipped through, below the first number, or another key of its number is stored or sunk.
    template <class Sink>
    bool skipped_number(const claim_key& key, const memory::store& store, const Sink& sink, const last_released_fn& last) const {
        const auto n = number(key);
        if (!n) return false;
        if (first_ && *n < *first_) return true;
        if (const auto released = last(context(key)); released && *n <= *released) return true;
        for (const auto& [other, number] : number_)
            if (number == *n && other != key && context(other) == context(key) && (sink.contains(other) || !store.messages_with_key(other).empty()))
                return true;
        return false;
    }

private:
    bool active_ = false;
    std::optional<std::int64_t> first_;
    std::map<claim_key, std::int64_t> number_;
    std::map<claim_key, std::string> context_;
    std::map<std::string, std::map<std::int64_t, std::set<claim_key>>> completed_;  // by context, number
};

/// The committed numbered progress of the context's newest instance (none: no instance).
inline std::optional<numbered_progress> progress_of(const memory::store& store, const std::string& sequence, const std::string& context) {
    message_page page;
    page.limit = 1;
    const auto view = store.view_instance(sequence, context, page);
    if (!view) return std::nullopt;
    return view->numbering;
}

/// At quiescence: each instance's lowest WAITING number waits behind a missing one. A context
/// an operator acted on (CONSUME or EXPIRE of a later number, CLOSE) may keep numbers below.
template <class OperatorTouched>
void check_waiting_numbers(const memory::store& store, const numbered_watch& watch, OperatorTouched touched, bool connection_lost,
                           violation_log& log) {
    for (const auto& instance : store.instances()) {
        const auto view = store.view_instance(instance.id, message_page{.limit = 1});
        if (!view || view->numbering.waiting.empty() || touched(instance.context_id)) continue;
        const std::int64_t lowest = view->numbering.waiting.front();
        const auto released = view->numbering.last_released;
        const std::optional<std::int64_t> expected = released ? std::optional(*released + 1) : watch.first_number();
        const std::string where = "number " + std::to_string(lowest) + " of " + instance.context_id;
        if (!expected || lowest == *expected)
            log.add(connection_lost ? "stranded_after_lost_connection" : "stranded", where + " is WAITING although it is the next number");
        else if (lowest < *expected)
            log.add("number_waiting_below_released", where + " is WAITING although " + std::to_string(*expected - 1) + " was released");
    }
}

}  // namespace seqinbox::sim
