#pragma once
// Shrinking a failing run: replay its steps as a script while dropping planned deliveries and
// chunks of steps, keeping every change after which a violation of the same kind still shows.
// Bounded by a number of replays, so that a failing seed reports quickly.
#include <algorithm>
#include <optional>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "chooser.hpp"
#include "simulation.hpp"

namespace seqinbox::sim {

struct shrunk_run {
    std::vector<step> script;
    std::set<std::size_t> dropped;
    std::size_t replays = 0;
};

template <class Claim, class Store = memory::store>
run_result replay(const scenario& s, const std::vector<step>& script, run_options options) {
    simulation<Claim, Store> sim(s, std::move(options));
    script_chooser chooser(script);
    return sim.run(chooser);
}

template <class Claim, class Store = memory::store>
class shrinker {
public:
    shrinker(const scenario& s, std::string kind, std::size_t max_replays) : scenario_(s), kind_(std::move(kind)), budget_(max_replays) {}

    shrunk_run shrink(std::vector<step> script, std::size_t violation_step) {
        script.resize(std::min(script.size(), violation_step + 1));  // what follows cannot matter
        shrunk_.script = std::move(script);
        drop_messages();
        drop_deliveries();
        for (std::size_t chunk = std::max<std::size_t>(shrunk_.script.size() / 2, 1); chunk > 0; chunk /= 2)
            drop_chunks(chunk);
        return shrunk_;
    }

private:
    /// True (and the candidate kept) when a violation of the kind still shows with it and the
    /// run got smaller: fewer steps up to the violation, or fewer deliveries.
    bool keep_if_failing(const std::vector<step>& script, const std::set<std::size_t>& dropped) {
        if (shrunk_.replays >= budget_) return false;
        ++shrunk_.replays;
        run_options options;
        options.dropped = dropped;
        options.trace = true;  // for the subjects of the steps
        auto result = replay<Claim, Store>(scenario_, script, options);
        const auto found = std::ranges::find(result.violations, kind_, &violation::kind);
        if (found == result.violations.end()) return false;
        const std::size_t keep = std::min(result.steps.size(), found->step + 1);
        if (keep >= shrunk_.script.size() && dropped.size() <= shrunk_.dropped.size()) return false;
        result.steps.resize(keep);
        result.subjects.resize(keep);
        shrunk_.script = std::move(result.steps);
        subjects_ = std::move(result.subjects);
        shrunk_.dropped = dropped;
        return true;
    }

    /// Leaves out a logical message: every copy, and every step that worked on it.
    void drop_messages() {
        run_options options;
        options.trace = true;
        subjects_ = replay<Claim, Store>(scenario_, shrunk_.script, options).subjects;
        ++shrunk_.replays;
        for (std::size_t m = 0; m < scenario_.work.messages.size(); ++m) {
            auto dropped = shrunk_.dropped;
            for (std::size_t d = 0; d < scenario_.work.deliveries.size(); ++d)
                if (scenario_.work.deliveries[d].message == m) dropped.insert(d);
            const claim_key key = scenario_.work.messages[m].key();
            std::vector<step> script;
            for (std::size_t i = 0; i < shrunk_.script.size(); ++i)
                if (i >= subjects_.size() || subjects_[i] != key) script.push_back(shrunk_.script[i]);
            keep_if_failing(script, dropped);
        }
    }

    void drop_deliveries() {
        for (std::size_t d = 0; d < scenario_.work.deliveries.size(); ++d) {
            auto dropped = shrunk_.dropped;
            dropped.insert(d);
            keep_if_failing(shrunk_.script, dropped);
        }
    }

    void drop_chunks(std::size_t chunk) {
        for (std::size_t start = 0; start < shrunk_.script.size();) {
            auto candidate = shrunk_.script;
            candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(start),
                            candidate.begin() + static_cast<std::ptrdiff_t>(std::min(start + chunk, candidate.size())));
            if (!keep_if_failing(candidate, shrunk_.dropped)) start += chunk;
        }
    }

    const scenario& scenario_;
    std::string kind_;
    std::size_t budget_;
    shrunk_run shrunk_;
    std::vector<std::optional<claim_key>> subjects_;  // of shrunk_.script's steps
};

}  // namespace seqinbox::sim
