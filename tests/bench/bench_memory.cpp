// bench_memory: throughput and release-pass cost of the inbox on the in-memory backend.
//
// Prints one `name value` pair per line. The machine running it is noisy, so every absolute
// figure comes with a ratio against a baseline measured in the same run.
//
//   bench_memory            full sizes (Release build expected)
//   bench_memory --quick    tiny sizes, for the CTest smoke run
//   bench_memory --contexts N   throughput part only, over N contexts (for profiling)
//
// The full run also prints how the cost per delivery grows with the data: the same workload over
// 1,000 and over 100,000 contexts (delivery_cost_ratio_100000_vs_1000; flat is 1, the aim is at
// most 1.5 — what remains is the cache: the baseline's own ratio is printed beside it).
//
// Exits non-zero when a correctness check fails (a logical message not handled exactly once,
// out of order, or a release pass releasing the wrong number of messages).
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bench/bench_support.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "support/world.hpp"

namespace {

using seqinbox::envelope;
using seqinbox::memory::inbox;
using seqinbox::testing::declare;
using seqinbox::testing::record;
using namespace seqinbox::bench;  // require, print, clocks: the benchmarks' shared vocabulary

constexpr int runs = 5;  // best of N: the machine is shared and noisy

/// A chain sequence: types[0] has no condition, types[i] is released after types[i-1].
seqinbox::declarations<std::string> chain(const std::string& name, const std::vector<std::string>& types) {
    seqinbox::sequence_declaration<std::string> seq;
    seq.name = name;
    seq.retention = std::chrono::hours(24);
    for (std::size_t i = 0; i < types.size(); ++i)
        seq.messages.push_back(i == 0 ? declare(types[i]) : declare(types[i], seqinbox::after(types[i - 1])));
    seqinbox::declarations<std::string> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

// ---------------------------------------------------------------------------------------------
// 1. Throughput: A; B after A; C after B over many contexts, out of order and duplicated.
// ---------------------------------------------------------------------------------------------

const std::vector<std::string> abc = {"A", "B", "C"};

struct stream {
    std::vector<envelope> deliveries;
    std::size_t contexts = 0;
    std::size_t logical = 0;     // distinct logical messages
    std::size_t duplicates = 0;  // re-deliveries of an already generated record
    std::size_t out_of_order = 0;  // deliveries of a context whose arrival order is not A, B, C
};

/// Idempotence ids are `<context index>-<type>` so that the listener can check the order per
/// context without a map lookup; the context id (record key) is `ctx<index>`.
stream generate(std::size_t contexts, double duplicate_share, std::uint32_t seed) {
    std::mt19937 rng(seed);
    stream s;
    s.contexts = contexts;
    s.logical = contexts * abc.size();

    // Arrival order per context: identity for half the contexts, one of the five other
    // permutations (C or B before A, or C before B) for the other half.
    std::vector<std::array<std::size_t, 3>> orders(contexts);
    std::vector<std::array<std::size_t, 3>> permutations;
    std::array<std::size_t, 3> p{0, 1, 2};
    do permutations.push_back(p);
    while (std::next_permutation(p.begin(), p.end()));  // permutations[0] is the identity
    std::uniform_int_distribution<std::size_t> other(1, permutations.size() - 1);
    for (std::size_t c = 0; c < contexts; ++c) {
        orders[c] = c % 2 == 0 ? permutations[0] : permutations[other(rng)];
        if (c % 2 != 0) s.out_of_order += abc.size();
    }

    // Interleave the contexts at random while keeping each context's arrival order.
    std::vector<std::size_t> slots;
    slots.reserve(s.logical);
    for (std::size_t c = 0; c < contexts; ++c)
        for (std::size_t k = 0; k < abc.size(); ++k) slots.push_back(c);
    std::ranges::shuffle(slots, rng);
    std::vector<std::size_t> next(contexts, 0);
    std::vector<envelope> originals;
    originals.reserve(s.logical);
    for (std::size_t c : slots) {
        const std::string& type = abc[orders[c][next[c]++]];
        originals.push_back(record(type, std::to_string(c) + "-" + type, "ctx" + std::to_string(c)));
    }

    // Duplicates make up `duplicate_share` of all deliveries; each re-delivers a random original
    // at a random later point of the stream.
    s.duplicates = static_cast<std::size_t>(static_cast<double>(s.logical) * duplicate_share / (1.0 - duplicate_share));
    struct placed {
        double at;
        std::size_t original;
    };
    std::vector<placed> order;
    order.reserve(s.logical + s.duplicates);
    for (std::size_t i = 0; i < originals.size(); ++i) order.push_back({static_cast<double>(i), i});
    std::uniform_int_distribution<std::size_t> pick(0, originals.size() - 1);
    for (std::size_t d = 0; d < s.duplicates; ++d) {
        const std::size_t i = pick(rng);
        std::uniform_real_distribution<double> later(static_cast<double>(i) + 0.5, static_cast<double>(originals.size()));
        order.push_back({later(rng), i});
    }
    std::ranges::stable_sort(order, {}, &placed::at);
    s.deliveries.reserve(order.size());
    std::int64_t offset = 0;
    for (const auto& o : order) {
        s.deliveries.push_back(originals[o.original]);
        s.deliveries.back().offset = offset++;
    }
    return s;
}

struct throughput_checks {
    std::size_t calls = 0;
    std::size_t misordered = 0;
    std::vector<std::uint8_t> progress;  // per context: how many of A, B, C were handled
};

struct loop_result {
    double elapsed_ns;
    std::size_t duplicates;
    std::size_t others;  // neither processed, buffered nor duplicate
};

/// The timed deliver loop; kept out of line so that a profiler can collect exactly this part
/// (valgrind --tool=callgrind --toggle-collect='*deliver_all*').
[[gnu::noinline]] loop_result deliver_all(inbox& in, const stream& s) {
    loop_result r{0, 0, 0};
    const auto started = clock_type::now();
    for (const auto& e : s.deliveries) {
        const auto result = in.deliver(e);
        if (result.outcome == seqinbox::outcome::duplicate)
            ++r.duplicates;
        else if (result.outcome != seqinbox::outcome::processed && result.outcome != seqinbox::outcome::buffered)
            ++r.others;
    }
    r.elapsed_ns = elapsed_ns(started, clock_type::now());
    return r;
}

/// Delivers the whole stream into a fresh store; returns the time of the deliver loop only.
double run_inbox(const stream& s) {
    seqinbox::memory::store store;
    seqinbox::memory::source source;
    seqinbox::memory::error_sink sink;
    inbox in(store, source, sink, chain("ThroughputSequence", abc));
    throughput_checks checks;
    checks.progress.assign(s.contexts, 0);
    for (std::size_t k = 0; k < abc.size(); ++k) {
        const auto expected = static_cast<std::uint8_t>(k);
        in.on(abc[k], [&checks, expected](const std::string&, const inbox::context& ctx) {
            ++checks.calls;
            std::size_t c = 0;
            const std::string& id = ctx.idempotence_id;
            std::from_chars(id.data(), id.data() + id.size(), c);
            if (c >= checks.progress.size() || checks.progress[c] != expected)
                ++checks.misordered;
            else
                ++checks.progress[c];
        });
    }

    const auto [elapsed, duplicates, others] = deliver_all(in, s);

    require(checks.calls == s.logical, "listener calls " + std::to_string(checks.calls) + " != logical messages " +
                                           std::to_string(s.logical));
    require(checks.misordered == 0, std::to_string(checks.misordered) + " listener calls out of declared order");
    require(std::ranges::all_of(checks.progress, [](std::uint8_t n) { return n == 3; }), "a context was not completed");
    require(duplicates == s.duplicates, "duplicates skipped " + std::to_string(duplicates) + " != generated " +
                                            std::to_string(s.duplicates));
    require(others == 0, std::to_string(others) + " deliveries neither processed, buffered nor duplicate");
    require(sink.size() == 0, "error sink not empty");
    return elapsed;
}

/// Comparable bookkeeping without the inbox: read both headers, build the claim key, insert it
/// into a hash set (the duplicate check), and count the first insertions as handled.
double run_baseline(const stream& s) {
    std::unordered_set<std::string> claimed;
    std::size_t handled = 0;
    const auto started = clock_type::now();
    for (const auto& e : s.deliveries) {
        const auto type = e.find_header("message-type").value_or("");
        const auto id = e.find_header("idempotence-id").value_or("");
        std::string key;
        key.reserve(type.size() + id.size() + 1);
        key.append(type).push_back('\0');
        key.append(id);
        if (claimed.insert(std::move(key)).second) ++handled;
    }
    const auto finished = clock_type::now();
    require(handled == s.logical, "baseline handled " + std::to_string(handled) + " != " + std::to_string(s.logical));
    return elapsed_ns(started, finished);
}

void bench_throughput(std::size_t contexts) {
    const stream s = generate(contexts, 0.20, 20240601u);
    const auto n = static_cast<double>(s.deliveries.size());
    double best_inbox = std::numeric_limits<double>::max();
    double best_baseline = std::numeric_limits<double>::max();
    for (int r = 0; r < runs; ++r) {
        best_baseline = std::min(best_baseline, run_baseline(s));
        best_inbox = std::min(best_inbox, run_inbox(s));
    }
    const double inbox_ns = best_inbox / n;
    const double baseline_ns = best_baseline / n;
    print("deliveries", s.deliveries.size());
    print("contexts", s.contexts);
    print("logical_messages", s.logical);
    print("duplicate_deliveries", s.duplicates);
    print("out_of_order_deliveries", s.out_of_order);
    print("deliveries_per_s", 1e9 / inbox_ns);
    print("delivery_ns_per_op", inbox_ns);
    print("baseline_ns_per_op", baseline_ns);
    // How many times the cost of one baseline operation one delivery costs.
    print("deliveries_vs_baseline", inbox_ns / baseline_ns);
}

/// Best time per delivery of the inbox and of the baseline over `runs_of` runs of `s`.
std::pair<double, double> best_per_delivery(const stream& s, int runs_of) {
    double inbox_ns = std::numeric_limits<double>::max();
    double baseline_ns = std::numeric_limits<double>::max();
    for (int r = 0; r < runs_of; ++r) {
        baseline_ns = std::min(baseline_ns, run_baseline(s));
        inbox_ns = std::min(inbox_ns, run_inbox(s));
    }
    const auto n = static_cast<double>(s.deliveries.size());
    return {inbox_ns / n, baseline_ns / n};
}

/// The cost per delivery over `large` contexts against `small`: a store whose cost per operation
/// grows with its data (a copy of its tables per commit, say) shows here. The small run is short,
/// so it gets more tries: the best of each is the figure least disturbed by a noisy machine.
void bench_growth(std::size_t small, std::size_t large) {
    const stream few = generate(small, 0.20, 20240602u);
    const stream many = generate(large, 0.20, 20240603u);
    const int small_runs = static_cast<int>(std::clamp<std::size_t>(large / small * runs, runs, 500));
    const auto [few_ns, few_baseline] = best_per_delivery(few, small_runs);
    const auto [many_ns, many_baseline] = best_per_delivery(many, runs);
    const std::string s = std::to_string(small), l = std::to_string(large);
    print("delivery_ns_contexts_" + s, few_ns);
    print("delivery_ns_contexts_" + l, many_ns);
    print("delivery_cost_ratio_" + l + "_vs_" + s, many_ns / few_ns);
    print("baseline_cost_ratio_" + l + "_vs_" + s, many_baseline / few_baseline);
}

// ---------------------------------------------------------------------------------------------
// 2. Release pass: W/2 D's (never releasable) buffered before W/2 B's, then one A releases the B's.
// ---------------------------------------------------------------------------------------------

const std::vector<std::string> abcd = {"A", "B", "C", "D"};

/// Returns the time of the single delivery of A, per released message.
double run_release(std::size_t w) {
    seqinbox::memory::store store;
    seqinbox::memory::source source;
    seqinbox::memory::error_sink sink;
    inbox in(store, source, sink, chain("ReleaseSequence", abcd));
    std::size_t calls = 0;
    for (const auto& type : abcd) in.on(type, [&calls](const std::string&, const inbox::context&) { ++calls; });

    const std::string context = "ctx";
    const std::size_t half = w / 2;
    std::vector<envelope> buffered;
    buffered.reserve(w);
    for (std::size_t i = 0; i < half; ++i) buffered.push_back(record("D", "d" + std::to_string(i), context));
    for (std::size_t i = 0; i < half; ++i) buffered.push_back(record("B", "b" + std::to_string(i), context));
    for (const auto& e : buffered)
        require(in.deliver(e).outcome == seqinbox::outcome::buffered, "setup delivery not buffered");
    require(calls == 0, "a listener ran during setup");
    const envelope a = record("A", "a", context);

    const auto started = clock_type::now();
    const auto result = in.deliver(a);
    const auto finished = clock_type::now();

    require(result.outcome == seqinbox::outcome::processed, "A not processed");
    require(result.released == half, "W=" + std::to_string(w) + ": released " + std::to_string(result.released) +
                                          " != " + std::to_string(half));
    require(result.release_failures == 0, "release failures");
    require(calls == half + 1, "listener calls during the release pass");
    return elapsed_ns(started, finished) / static_cast<double>(half);
}

void bench_release(const std::vector<std::size_t>& sizes, std::size_t ratio_num, std::size_t ratio_den) {
    double num = 0;
    double den = 0;
    for (std::size_t w : sizes) {
        double best = std::numeric_limits<double>::max();
        for (int r = 0; r < runs; ++r) best = std::min(best, run_release(w));
        print("release_ns_per_msg_w" + std::to_string(w), best);
        if (w == ratio_num) num = best;
        if (w == ratio_den) den = best;
    }
    if (num > 0 && den > 0)
        print("release_ratio_w" + std::to_string(ratio_num) + "_vs_w" + std::to_string(ratio_den), num / den);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::size_t contexts = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--quick") {
            quick = true;
        } else if (arg == "--contexts" && i + 1 < argc) {
            const std::string_view n = argv[++i];
            if (std::from_chars(n.data(), n.data() + n.size(), contexts).ec != std::errc{} || contexts == 0) contexts = 0;
            if (contexts == 0) {
                std::fprintf(stderr, "%s: --contexts needs a positive number\n", argv[0]);
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: %s [--quick | --contexts N]\n", argv[0]);
            return 2;
        }
    }
    return seqinbox::bench::run_guarded("bench_memory", [&] {
        if (contexts > 0) {
            bench_throughput(contexts);
        } else if (quick) {
            bench_throughput(400);
            bench_growth(100, 1000);
            bench_release({10, 100, 1000}, 1000, 100);
        } else {
            // 26,667 contexts x 3 types = 80,001 logical messages + 20 % duplicates = ~100,000 deliveries.
            bench_throughput(26'667);
            bench_growth(1'000, 100'000);
            bench_release({10, 100, 1000, 10000}, 10000, 100);
        }
    });
}
