#pragma once
// A run's numbered checks (numbered_checks.hpp) wired to the run's store, error sink and probe.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checker.hpp"
#include "listener_probe.hpp"
#include "numbered_checks.hpp"
#include "scenario.hpp"
#include "seqinbox/memory/store.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

class numbered_run {
public:
    numbered_run(const memory::store& store, const sink_index& sunk, const scenario& s)
        : store_(&store), sunk_(&sunk), watch_(s.work, s.decls), sequence_(s.decls.sequences.front().name) {
        for (const auto& m : s.work.messages) contexts_.insert(m.context);
    }
    numbered_run(const numbered_run&) = delete;
    numbered_run& operator=(const numbered_run&) = delete;

    /// Numbered seeds: the probe checks the numbers of released listeners, and a key skipped as a
    /// duplicate of its number is not lost.
    void watch(listener_probe& probe, nothing_lost_check& lost) {
        probe.watch_numbers(watch_, [this](const std::string& context) { return current(context); });
        lost.settle_skipped_numbers(skipped_number());
    }

    /// Whether a key without a row was skipped as a duplicate of its number; empty unless numbered.
    /// Once seen skipped it stays so: housekeeping may remove what made it a duplicate.
    std::function<bool(const claim_key&)> skipped_number() {
        if (!watch_.active()) return {};
        return [this](const claim_key& key) {
            if (skipped_.contains(key)) return true;
            if (!watch_.skipped_number(key, *store_, *sunk_, [this](const std::string& c) { return highest(c); })) return false;
            skipped_.insert(key);
            return true;
        };
    }

    /// After every step: the highest number each context released or skipped so far, kept
    /// for the skip judgement after housekeeping removed the instance (a duplicate's ack may follow).
    void observe() {
        if (!watch_.active()) return;
        for (const auto& context : contexts_)
            if (const auto last = current(context)) high_[context] = std::max(high_[context], *last);
    }

    /// After a transaction ended: no two WAITING rows of one instance share a number (the second
    /// is a duplicate of its number, skipped rather than stored). Each number is reported once.
    void check_rows(const std::vector<message_record>& rows, violation_log& log) {
        if (!watch_.active()) return;
        std::map<std::pair<instance_id, std::int64_t>, std::size_t> waiting;
        for (const auto& row : rows)
            if (row.state == message_state::waiting && row.number && ++waiting[{row.instance, *row.number}] == 2 &&
                reported_.insert({row.instance, *row.number}).second)
                log.add("number_waiting_twice", "two WAITING rows of number " + std::to_string(*row.number) + " in instance " +
                                                    std::to_string(row.instance) + " (" + listener_probe::text(row.key()) + " the second)");
    }

    void check_at_end(const listener_probe& probe, bool connection_lost, violation_log& log) const {
        check_waiting_numbers(*store_, watch_, [&](const std::string& c) { return probe.operator_touched(c); }, connection_lost, log);
        watch_.check_completed_once([&](const claim_key& key) { return probe.had_window(key); }, log);
    }

private:
    std::optional<std::int64_t> current(const std::string& context) const {
        const auto progress = progress_of(*store_, sequence_, context);
        return progress ? progress->last_released : std::nullopt;
    }
    std::optional<std::int64_t> highest(const std::string& context) const {
        const auto it = high_.find(context);
        const auto now = current(context);
        if (it == high_.end()) return now;
        return std::max(it->second, now.value_or(it->second));
    }

    const memory::store* store_;
    const sink_index* sunk_;
    numbered_watch watch_;
    std::string sequence_;
    std::set<claim_key> skipped_;
    std::set<std::string> contexts_;
    std::set<std::pair<instance_id, std::int64_t>> reported_;
    std::map<std::string, std::int64_t> high_;  // by context: see observe
};

}  // namespace seqinbox::sim
