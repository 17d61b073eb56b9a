#pragma once
// Runs a range of seeds on a few threads. Every seed is independent (its own store, driver and
// tasks), so the outcome of a seed does not depend on the thread that ran it; the results come
// back in seed order, as a contiguous prefix of the range when time or a failure stops it early.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace seqinbox::sim {

struct batch_limits {
    std::uint64_t first_seed = 1;
    std::uint64_t seeds = 0;
    unsigned jobs = 1;
    std::optional<std::chrono::steady_clock::time_point> deadline;  ///< no new seed after it
};

/// `run(seed)` gives a result; `stops(result)` ends the batch after that seed (no seed after it
/// is started; seeds already running finish). Returns the results of seeds first_seed, +1, ...
template <class Result, class Run, class Stops>
std::vector<Result> run_batch(const batch_limits& limits, Run run, Stops stops) {
    std::vector<std::optional<Result>> slots(limits.seeds);
    std::atomic<std::uint64_t> next{0};
    std::atomic<std::uint64_t> stop_at{limits.seeds};  // index of the first stopping seed, or seeds
    auto worker = [&] {
        for (std::uint64_t i = next++; i < stop_at.load(); i = next++) {
            if (limits.deadline && std::chrono::steady_clock::now() >= *limits.deadline) {
                for (std::uint64_t s = stop_at.load(); i < s && !stop_at.compare_exchange_weak(s, i);) {}
                return;
            }
            slots[i].emplace(run(limits.first_seed + i));
            if (stops(*slots[i]))
                for (std::uint64_t s = stop_at.load(); i + 1 < s && !stop_at.compare_exchange_weak(s, i + 1);) {}
        }
    };
    std::vector<std::thread> threads;
    for (unsigned j = 1; j < limits.jobs; ++j) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    std::vector<Result> results;
    for (std::uint64_t i = 0; i < stop_at.load() && slots[i]; ++i) results.push_back(std::move(*slots[i]));
    return results;
}

}  // namespace seqinbox::sim
