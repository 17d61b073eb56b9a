#pragma once
// Watches every listener invocation as it happens and checks the promises about listeners:
//  - at most one invocation in flight per claim key and per context;
//  - a listener starts only when its type's release condition holds against the types whose
//    listeners already succeeded in the same context;
// and counts successes per claim key for the end-of-run check. Listeners run on driven tasks,
// one thread at a time, so the probe needs no lock of its own beyond the step hand-over.
//
// An invocation is "orphaned" when its task's connection dies while it runs: the claim and the
// instance lock are gone, so a duplicate may legitimately take over while it still runs (the
// documented at-least-once window). Orphans are left out of the overlap checks, and their claim
// key is marked as having had the window.
#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/declare/validate.hpp"
#include "seqinbox/store/model.hpp"
#include "support/world.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

class listener_probe {
public:
    struct invocation {
        std::size_t consumer;
        claim_key key;
        std::string context;
        bool orphan = false;
    };

    listener_probe(const declarations<testing::message>& decls, violation_log& log) : log_(&log) {
        for (const auto& m : decls.sequences.front().messages) release_.emplace(m.qualified_type(), m.release);
    }

    // ---- called by the listeners, on their tasks ----

    void enter(std::size_t consumer, const claim_key& key, const std::string& context) {
        if (disconnected_.contains(consumer)) return enter_disconnected(consumer, key, context);
        for (const auto& other : in_flight_) {
            if (other.orphan) continue;
            if (other.key == key)
                log_->add("listener_overlap_key", "listener of " + text(key) + " started on c" + std::to_string(consumer) +
                                                      " while c" + std::to_string(other.consumer) + " still runs it");
            else if (other.context == context)
                log_->add("listener_overlap_context", "listener of " + text(key) + " started in " + context + " on c" +
                                                          std::to_string(consumer) + " while " + text(other.key) +
                                                          " runs on c" + std::to_string(other.consumer));
        }
        check_order(key, context);
        in_flight_.push_back({consumer, key, context});
    }

    /// True when the controller armed a failure for this consumer's listener (consumed).
    bool take_failure(std::size_t consumer) { return armed_.erase(consumer) > 0; }

    void leave(std::size_t consumer, bool succeeded) {
        auto it = std::ranges::find(in_flight_, consumer, &invocation::consumer);
        if (it == in_flight_.end()) return;
        if (succeeded) {
            ++successes_[it->key];
            succeeded_types_[it->context].insert(it->key.type);
            completed_[consumer].push_back(it->key);
        }
        in_flight_.erase(it);
    }

    /// The consumer's worker starts deciding a new delivery.
    void begin_delivery(std::size_t consumer) {
        completed_[consumer].clear();
        disconnected_.erase(consumer);
    }

    // ---- called by the controller ----

    void arm_failure(std::size_t consumer) { armed_.insert(consumer); }
    bool armed(std::size_t consumer) const { return armed_.contains(consumer); }
    bool inside_listener(std::size_t consumer) const { return running(consumer) != nullptr; }
    /// The invocation the consumer's task is inside, if any.
    const invocation* running(std::size_t consumer) const {
        auto it = std::ranges::find(in_flight_, consumer, &invocation::consumer);
        return it == in_flight_.end() ? nullptr : &*it;
    }

    /// The consumer's connection died: its running invocation becomes an orphan, and every key it
    /// handled in this delivery whose state `is_durable` does not report is in the window.
    template <class IsDurable>
    std::size_t connection_lost(std::size_t consumer, IsDurable is_durable) {
        std::size_t opened = 0;
        disconnected_.insert(consumer);
        for (auto& call : in_flight_)
            if (call.consumer == consumer && !call.orphan) {
                call.orphan = true;
                opened += open_window(call.key);
            }
        for (const auto& key : completed_[consumer])
            if (!is_durable(key)) opened += open_window(key);
        return opened;
    }

    std::size_t successes(const claim_key& key) const {
        auto it = successes_.find(key);
        return it == successes_.end() ? 0 : it->second;
    }
    bool had_window(const claim_key& key) const { return windows_.contains(key); }
    std::size_t in_flight() const noexcept { return in_flight_.size(); }

    static std::string text(const claim_key& key) { return key.type + "/" + key.idempotence_id; }

private:
    std::size_t open_window(const claim_key& key) { return windows_.insert(key).second ? 1 : 0; }

    /// A listener started by a delivery whose connection already died: it holds neither the
    /// claim nor the instance lock, so it is reported on its own, and the overlaps and repeats
    /// it causes are attributed to it rather than reported again.
    void enter_disconnected(std::size_t consumer, const claim_key& key, const std::string& context) {
        log_->add("listener_after_lost_connection", "listener of " + text(key) + " in " + context + " started on c" +
                                                        std::to_string(consumer) + " after its connection was lost");
        check_order(key, context);
        open_window(key);
        in_flight_.push_back({consumer, key, context, true});
    }

    void check_order(const claim_key& key, const std::string& context) {
        const auto& done = succeeded_types_[context];
        const condition& release = release_.at(key.type);
        if (release.satisfied([&](const std::string& t) { return done.contains(t); })) return;
        std::string before;
        for (const auto& t : done) before += (before.empty() ? "" : ",") + t;
        log_->add("listener_out_of_order", "listener of " + text(key) + " in " + context + " started before '" +
                                               detail::describe(release) + "' held (succeeded: " +
                                               (before.empty() ? "none" : before) + ")");
    }

    violation_log* log_;
    std::map<std::string, condition> release_;
    std::vector<invocation> in_flight_;
    std::set<std::size_t> armed_;
    std::map<claim_key, std::size_t> successes_;
    std::map<std::string, std::set<std::string>> succeeded_types_;  // by context
    std::map<std::size_t, std::vector<claim_key>> completed_;       // by consumer, this delivery
    std::set<claim_key> windows_;
    std::set<std::size_t> disconnected_;  // consumers whose connection died in this delivery
};

}  // namespace seqinbox::sim
