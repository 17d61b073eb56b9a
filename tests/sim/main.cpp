// seqinbox-sim: the deterministic simulator. Runs many seeds (or replays one), checks the
// invariants of docs/guarantees.md after every step, shrinks and prints the first failing seed, and prints
// its figures as `name value` lines. Exit status: 0 no violation (or, with --expect-violation, a
// violation found), 1 a violation (or none found when one was expected), 2 usage error.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "batch.hpp"
#include "chooser.hpp"
#include "seqinbox/declare/problems.hpp"
#include "no_claim.hpp"
#include "planted.hpp"
#include "scenario.hpp"
#include "seqinbox/claim/check_then_insert.hpp"
#include "seqinbox/claim/insert_first.hpp"
#include "shrink.hpp"
#include "simulation.hpp"
#include "source_run.hpp"

namespace {

using namespace seqinbox;
using namespace seqinbox::sim;

struct options {
    std::uint64_t first_seed = 1;
    std::uint64_t seeds = 1000;
    double time_budget_s = 0;       ///< 0: no limit
    std::uint64_t min_seeds = 0;    ///< fewer seeds run (time budget) is a failure
    std::optional<std::uint64_t> replay_seed;
    std::string claim = "insert_first";
    bool expect_violation = false;  ///< the teeth: stop at the first violation, succeed if found
    bool trace = false;             ///< with --seed: print every step
    std::size_t max_steps = 20'000;
    std::size_t shrink_replays = 400;
    std::set<std::string> known_issues;  ///< violation kinds counted and listed but not failing
    unsigned jobs = 1;                   ///< seeds run at once, each on its own controller thread
    source::defect planted = source::defect::none;  ///< test-only defect in the source model's code
    bool planted_instance_cache = false;            ///< test-only defect 1 of issue 17 (process_store.hpp)
    bool planted_late_instances = false;            ///< test-only defect 1 of issue 33 (process_store.hpp)
    bool planted_overflow_unchecked = false;        ///< test-only: count_waiting answers 0 (planted.hpp)
    std::optional<planted_defect> planted_numbers;  ///< test-only defects of numbered sequences (planted.hpp)
};

constexpr std::string_view usage =
    "usage: seqinbox-sim [--seeds N] [--first-seed N] [--time-budget S] [--min-seeds N]\n"
    "                    [--seed N [--trace]] [--claim insert_first|check_then_insert|no_claim]\n"
    "                    [--expect-violation] [--max-steps N] [--shrink-replays N]\n"
    "                    [--known-issue KIND]... [--jobs N]\n"
    "                    [--planted source_seek_to_own_record|source_commit_fetch_position|\n"
    "                               instance_cache_after_crash|batch_instances_in_transaction|\n"
    "                               overflow_check_skipped|number_gap_released|\n"
    "                               number_duplicate_check_skipped]\n";

std::uint64_t number(std::string_view flag, const char* text) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0') throw std::invalid_argument(std::string(flag) + " needs a number, got '" + text + "'");
    return value;
}

void plant(options& o, std::string_view name) {
    if (name == "instance_cache_after_crash") o.planted_instance_cache = true;
    else if (name == "batch_instances_in_transaction") o.planted_late_instances = true;
    else if (name == "overflow_check_skipped") o.planted_overflow_unchecked = true;
    else if (name == "number_gap_released") o.planted_numbers = planted_defect::number_gap_released;
    else if (name == "number_duplicate_check_skipped") o.planted_numbers = planted_defect::number_duplicate_check_skipped;
    else o.planted = source::defect_named(name);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) throw std::invalid_argument(std::string(flag) + " needs a value");
            return argv[++i];
        };
        if (flag == "--seeds") o.seeds = number(flag, value());
        else if (flag == "--first-seed") o.first_seed = number(flag, value());
        else if (flag == "--time-budget") o.time_budget_s = static_cast<double>(number(flag, value()));
        else if (flag == "--min-seeds") o.min_seeds = number(flag, value());
        else if (flag == "--seed") o.replay_seed = number(flag, value());
        else if (flag == "--claim") o.claim = value();
        else if (flag == "--expect-violation") o.expect_violation = true;
        else if (flag == "--trace") o.trace = true;
        else if (flag == "--max-steps") o.max_steps = number(flag, value());
        else if (flag == "--shrink-replays") o.shrink_replays = number(flag, value());
        else if (flag == "--known-issue") o.known_issues.insert(value());
        else if (flag == "--planted") plant(o, value());
        else if (flag == "--jobs") o.jobs = static_cast<unsigned>(std::max<std::uint64_t>(1, number(flag, value())));
        else throw std::invalid_argument("unknown option '" + std::string(flag) + "'");
    }
    return o;
}

void print(const tally& counts) {
    for (const auto& [name, value] : counts) std::cout << name << ' ' << value << '\n';
}

void add(tally& into, const tally& from) {
    for (const auto& [name, value] : from) into[name] += value;
}

/// Adds the run's violations to `totals` by kind; returns how many are not known issues.
std::size_t count_violations(const run_result& result, const options& o, tally& totals) {
    std::size_t real = 0;
    for (const auto& v : result.violations) {
        const bool known = o.known_issues.contains(v.kind);
        ++totals[(known ? "known_issue_" : "violations_") + v.kind];
        real += known ? 0 : 1;
    }
    return real;
}

/// The seed's run of the engine, then of the source model (its violations and counts added to
/// the engine's; its trace returned when asked).
template <class Claim, class Store>
run_result run_seed(const scenario& s, const options& o, bool trace, std::vector<std::string>* source_trace = nullptr) {
    simulation<Claim, Store> sim(s, {o.max_steps, trace, {}});
    random_chooser chooser(s);
    run_result result = sim.run(chooser);
    source::run_result source_run = source::run_seed(s.seed, {o.planted, source_trace != nullptr});
    result.violations.insert(result.violations.end(), source_run.violations.begin(), source_run.violations.end());
    add(result.counts, source_run.counts);
    if (source_trace) *source_trace = std::move(source_run.trace);
    return result;
}

/// One line per failing seed after the first: its seed and the kinds it violated.
void print_failing_seed(std::string_view name, std::uint64_t seed, const run_result& result) {
    std::set<std::string> kinds;
    for (const auto& v : result.violations) kinds.insert(v.kind);
    std::cout << name << ' ' << seed;
    for (const auto& k : kinds) std::cout << ' ' << k;
    std::cout << '\n';
}

void print_trace(const std::vector<std::string>& lines, std::size_t last_step) {
    for (std::size_t i = 0; i < lines.size() && i <= last_step; ++i) std::cout << "trace " << lines[i] << '\n';
}

void print_declaration(const scenario& s) {
    std::cout << "setup propagation " << (s.required ? "required" : "not_supported") << " batch_size " << s.batch_size
              << " max_batch_records " << s.max_batch_records << " lock_entries " << s.lock_entries << '\n';
    const auto& buffer = s.decls.sequences.front().buffer;
    std::cout << "buffer max_waiting " << buffer.limit() << (buffer.max_waiting ? "" : " (default)") << " on_overflow "
              << seqinbox::to_string(buffer.on_overflow) << '\n';
    for (const auto& m : s.decls.sequences.front().messages)
        std::cout << "declared " << m.qualified_type() << ' ' << seqinbox::describe(m.release) << '\n';
    if (!s.numbered()) return;
    const auto& n = s.decls.sequences.front().numbering;
    std::cout << "numbering first " << (n.first_number ? std::to_string(*n.first_number) : "first-seen") << " gap_timeout "
              << (n.gap_timeout ? std::to_string(n.gap_timeout->count()) + " s" : "none") << " on_gap " << seqinbox::to_string(n.on_gap) << '\n';
}

/// The first violation that is not a known issue (the run has one).
const violation& first_real(const run_result& result, const options& o) {
    return *std::ranges::find_if(result.violations, [&](const violation& v) { return !o.known_issues.contains(v.kind); });
}

bool of_source(const violation& v) { return v.kind.starts_with("source_"); }

/// Shrinks the seed's failing source-model run and prints its draw and short trace.
void report_source_failure(std::uint64_t seed, const std::string& kind, const options& o) {
    const source::setup s = source::make_setup(seed);
    source::run_options run{o.planted};
    const source::run_result failed = source::run_seed(seed, run);
    std::size_t replays = 0;
    const auto script = source::shrink(s, run, kind, failed.steps, o.shrink_replays, replays);
    run.trace = true;
    const source::run_result again = source::replay(s, script, run);
    std::cout << "source_setup " << source::describe(s) << '\n'
              << "source_shrunk_steps " << script.size() << " (from " << failed.steps.size() << ", " << replays << " replays)\n";
    for (const auto& v : again.violations)
        if (v.kind == kind) std::cout << "shrunk_violation " << v.kind << ": " << v.text << " (after source step " << v.step << ")\n";
    for (const auto& line : again.trace) std::cout << "source_trace " << line << '\n';
}

/// Shrinks the failing run of `s` and prints the seed, the violation and the short trace.
template <class Claim, class Store>
void report_failure(const scenario& s, const run_result& failed, const options& o) {
    const violation& first = first_real(failed, o);
    std::cout << "failing_seed " << s.seed << '\n';
    for (const auto& v : failed.violations)
        std::cout << "violation " << v.kind << ": " << v.text << " (after " << (of_source(v) ? "source step " : "step ") << v.step << ")\n";
    if (of_source(first)) return report_source_failure(s.seed, first.kind, o);
    print_declaration(s);
    shrinker<Claim, Store> shrink(s, first.kind, o.shrink_replays);
    const shrunk_run small = shrink.shrink(failed.steps, first.step);
    run_options options{o.max_steps, true, small.dropped};
    const run_result again = replay<Claim, Store>(s, small.script, options);
    const auto found = std::ranges::find(again.violations, first.kind, &violation::kind);
    std::cout << "shrunk_steps " << small.script.size() << " (from " << failed.steps.size() << ", " << small.replays << " replays)\n";
    std::cout << "shrunk_dropped_deliveries " << small.dropped.size() << " of " << s.work.deliveries.size() << '\n';
    if (found == again.violations.end()) return print_trace(again.trace, again.trace.size());
    std::cout << "shrunk_violation " << found->kind << ": " << found->text << " (after step " << found->step << ")\n";
    print_trace(again.trace, found->step);
}

template <class Claim, class Store>
int replay_one(const options& o) {
    const scenario s = make_scenario(*o.replay_seed);
    std::vector<std::string> source_trace;
    const run_result result = run_seed<Claim, Store>(s, o, o.trace, &source_trace);
    if (o.trace) {
        print_declaration(s);
        print_trace(result.trace, result.trace.size());
        std::cout << "source_setup " << source::describe(source::make_setup(s.seed)) << '\n';
        for (const auto& line : source_trace) std::cout << "source_trace " << line << '\n';
    }
    tally totals = result.counts;
    const std::size_t real = count_violations(result, o, totals);
    std::cout << "seed " << s.seed << '\n' << "violations " << real << '\n';
    print(totals);
    if (real > 0) report_failure<Claim, Store>(s, result, o);
    return (real == 0) != o.expect_violation ? 0 : 1;
}

struct seed_outcome {
    std::uint64_t seed;
    run_result result;  ///< steps kept only when it has violations
    std::size_t declarations_rejected;
    bool failing;       ///< a violation that is not a known issue
};

template <class Claim, class Store>
seed_outcome run_counted_seed(std::uint64_t seed, const options& o) {
    const scenario s = make_scenario(seed);
    run_result result = run_seed<Claim, Store>(s, o, false);
    if (result.violations.empty()) result.steps = {};
    const bool failing = std::ranges::any_of(result.violations, [&](const violation& v) { return !o.known_issues.contains(v.kind); });
    return {seed, std::move(result), s.declarations_rejected, failing};
}

template <class Claim, class Store>
int run_many(const options& o) {
    using clock = std::chrono::steady_clock;  // only for the budget and the rate, never in a run
    const auto started = clock::now();
    batch_limits limits{o.first_seed, o.seeds, o.jobs, std::nullopt};
    if (o.time_budget_s > 0) limits.deadline = started + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.time_budget_s));
    const auto outcomes = run_batch<seed_outcome>(
        limits, [&](std::uint64_t seed) { return run_counted_seed<Claim, Store>(seed, o); },
        [&](const seed_outcome& x) { return o.expect_violation && x.failing; });
    const double seconds = std::chrono::duration<double>(clock::now() - started).count();

    tally totals;  // the fault and operation figures are printed even when a run drew none
    for (const char* name : {"faults_listener_throw", "faults_connection_lost", "faults_connection_lost_in_listener",
                             "faults_crash_before_ack", "faults_crash_database", "faults_lock_table", "lock_table_errors", "lock_table_exhausted",
                             "batch_parts", "batch_records_given_back", "pool_second_leases", "seeds_required", "seeds_not_supported", "batches", "batched_deliveries", "deadlocks_broken", "crash_lost_commits", "crash_connections_lost", "crash_rows_without_claim", "instance_cache_stale_locks", "resends", "at_least_once_windows", "at_least_once_repeats",
                             "requests_CONSUME", "requests_EXPIRE", "requests_CONSUME_ALL", "requests_CLOSE", "requests_refused",
                             "action_runs", "actions_executed", "operator_replays", "housekeeping_runs", "housekeeping_marked",
                             "housekeeping_closed_removed", "housekeeping_expired_removed", "housekeeping_forwarded",
                             "instances_removed", "time_jumps", "retries_after_removal", "source_polls", "source_decisions",
                             "source_give_backs", "source_seeks", "source_commits", "source_commit_failures", "source_rebalances",
                             "source_revoked_in_flight", "source_restarts"})
        totals[name] = 0;
    std::uint64_t failing = 0, known = 0;
    for (const auto& x : outcomes) {
        add(totals, x.result.counts);
        totals["declarations_rejected"] += x.declarations_rejected;
        count_violations(x.result, o, totals);
        if (!x.failing) {
            if (!x.result.violations.empty() && ++known <= 20) print_failing_seed("known_issue_seed", x.seed, x.result);
            continue;
        }
        if (++failing == 1) report_failure<Claim, Store>(make_scenario(x.seed), x.result, o);
        else if (failing <= 20) print_failing_seed("failing_seed", x.seed, x.result);
    }
    if (o.expect_violation && failing > 0) std::cout << "seeds_until_violation " << outcomes.size() << '\n';
    std::cout << "claim " << o.claim << '\n' << "seeds_run " << outcomes.size() << '\n' << "violations " << failing << '\n'
              << "known_issue_seeds " << known << '\n' << "jobs " << o.jobs << '\n';
    std::cout << "elapsed_s " << seconds << '\n'
              << "seeds_per_s " << (seconds > 0 ? static_cast<double>(outcomes.size()) / seconds : 0) << '\n';
    print(totals);
    if (o.expect_violation) return failing > 0 ? 0 : 1;
    if (outcomes.size() < o.min_seeds) {
        std::cout << "too_few_seeds " << outcomes.size() << " < " << o.min_seeds << '\n';
        return 1;
    }
    return failing == 0 ? 0 : 1;
}

template <class Claim, class Store = memory::store>
int run_program(const options& o) {
    return o.replay_seed ? replay_one<Claim, Store>(o) : run_many<Claim, Store>(o);
}

int dispatch(const options& o) {
    if (o.claim == "insert_first" && o.planted_instance_cache)
        return run_program<claim::insert_first, planted_store<planted_defect::instance_cache_after_crash>>(o);
    if (o.claim == "insert_first" && o.planted_late_instances)
        return run_program<claim::insert_first, planted_store<planted_defect::batch_instances_in_transaction>>(o);
    if (o.claim == "insert_first" && o.planted_overflow_unchecked)
        return run_program<claim::insert_first, planted_store<planted_defect::overflow_check_skipped>>(o);
    if (o.planted_numbers == planted_defect::number_gap_released)
        return run_program<claim::insert_first, planted_store<planted_defect::number_gap_released>>(o);
    if (o.planted_numbers == planted_defect::number_duplicate_check_skipped)
        return run_program<claim::insert_first, planted_store<planted_defect::number_duplicate_check_skipped>>(o);
    if (o.planted_overflow_unchecked) throw std::invalid_argument("--planted overflow_check_skipped needs --claim insert_first");
    if (o.planted_instance_cache || o.planted_late_instances) throw std::invalid_argument("--planted " + std::string(o.planted_instance_cache ? "instance_cache_after_crash" : "batch_instances_in_transaction") + " needs --claim insert_first");
    if (o.claim == "insert_first") return run_program<claim::insert_first>(o);
    if (o.claim == "check_then_insert") return run_program<claim::check_then_insert>(o);
    if (o.claim == "no_claim") return run_program<no_claim>(o);
    throw std::invalid_argument("unknown claim strategy '" + o.claim + "'");
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "seqinbox-sim: " << e.what() << '\n' << usage;
        return 2;
    }
    try {
        return dispatch(o);
    } catch (const std::invalid_argument& e) {
        std::cerr << "seqinbox-sim: " << e.what() << '\n' << usage;
        return 2;
    }
}
