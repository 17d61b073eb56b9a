#pragma once
// One run of the source model (source_model.hpp): steps drawn by weight from the seed's own
// stream, or replayed from a script (inapplicable steps skipped; after the script, the run is
// drained without faults). The end is when no step applies. Shrinking drops chunks of a failing
// script while a violation of the same kind still shows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "source_model.hpp"

namespace seqinbox::sim::source {

struct run_result {
    std::vector<step> steps;  ///< applied, in order: the replayable script
    std::vector<violation> violations;
    std::vector<std::string> trace;  ///< one line per step, then the final commit, when asked
    std::map<std::string, std::uint64_t> counts;
};

/// The seed's weighted draw: a kind among those with a candidate, then one of its candidates.
class random_chooser {
public:
    explicit random_chooser(const setup& s) : rng_(scheduler_random(s.seed)), fault_percent_(s.fault_percent) {}

    std::optional<step> operator()(const model& m) {
        std::vector<std::pair<unsigned, std::vector<step>>> kinds;
        for (const action a : all_actions) {
            const unsigned weight = info(a).fault ? info(a).weight * fault_percent_ / 100 : info(a).weight;
            if (weight == 0) continue;
            if (auto candidates = m.candidates(a); !candidates.empty()) kinds.emplace_back(weight, std::move(candidates));
        }
        return rng_.pick_weighted(kinds);
    }

private:
    random rng_;
    unsigned fault_percent_;
};

/// A script, then the drain: a seek, a decision, a commit landing, a poll, a commit, in that
/// order of preference, so that the run ends without faults.
class script_chooser {
public:
    explicit script_chooser(const std::vector<step>& script) : script_(&script) {}

    std::optional<step> operator()(const model& m) {
        while (next_ < script_->size()) {
            const step& s = (*script_)[next_++];
            if (m.allows(s)) return s;
        }
        for (const action a : {action::seek, action::decide, action::commit_succeeds, action::poll, action::commit})
            if (auto candidates = m.candidates(a); !candidates.empty()) return candidates.front();
        return std::nullopt;
    }

private:
    const std::vector<step>* script_;
    std::size_t next_ = 0;
};

struct run_options {
    defect planted = defect::none;
    bool trace = false;
    std::size_t max_steps = 5'000;
};

template <class Chooser>
run_result run(const setup& s, Chooser& next, const run_options& options) {
    violation_log log;
    model m(s, options.planted, log);
    run_result result;
    while (result.steps.size() < options.max_steps) {
        log.at_step(result.steps.size());
        const std::optional<step> chosen = next(m);
        if (!chosen) break;
        std::string text = m.apply(*chosen);
        m.check_commits();
        if (options.trace) result.trace.push_back("#" + std::to_string(result.steps.size()) + " " + std::string(info(chosen->what).name) + " " + text);
        result.steps.push_back(*chosen);
    }
    log.at_step(result.steps.size());
    if (result.steps.size() >= options.max_steps) log.add("source_no_end", "still running after " + std::to_string(options.max_steps) + " steps");
    const std::string text = m.finish();
    if (options.trace) result.trace.push_back("#" + std::to_string(result.steps.size()) + " " + text);
    result.violations = log.all();
    result.counts = m.counts();
    ++result.counts["source_runs"];
    result.counts["source_steps"] += result.steps.size();
    return result;
}

inline run_result run_seed(std::uint64_t seed, const run_options& options) {
    const setup s = make_setup(seed);
    random_chooser chooser(s);
    return run(s, chooser, options);
}

inline run_result replay(const setup& s, const std::vector<step>& script, const run_options& options) {
    script_chooser chooser(script);
    return run(s, chooser, options);
}

inline bool shows(const run_result& r, const std::string& kind) {
    return std::ranges::any_of(r.violations, [&](const violation& v) { return v.kind == kind; });
}

/// The shortest script found within `max_replays` replays that still shows `kind`.
inline std::vector<step> shrink(const setup& s, const run_options& options, const std::string& kind, std::vector<step> script,
                                std::size_t max_replays, std::size_t& replays) {
    for (std::size_t chunk = std::max<std::size_t>(script.size() / 2, 1); chunk > 0; chunk /= 2)
        for (std::size_t start = 0; start < script.size() && replays < max_replays;) {
            auto candidate = script;
            candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(start),
                            candidate.begin() + static_cast<std::ptrdiff_t>(std::min(start + chunk, candidate.size())));
            ++replays;
            if (shows(replay(s, candidate, options), kind)) script = std::move(candidate);
            else start += chunk;
        }
    return script;
}

/// The setup's draw, for a failing seed's report.
inline std::string describe(const setup& s) {
    std::string text = "partitions";
    for (const auto end : s.log_ends) text += " " + std::to_string(end);
    text += " (records), members";
    for (const auto t : s.threads) text += " " + std::to_string(t);
    return text + " (threads), faults " + std::to_string(s.fault_percent) + "%";
}

}  // namespace seqinbox::sim::source
