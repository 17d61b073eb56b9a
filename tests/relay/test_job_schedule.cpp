// The relay's job schedule (private header, issue 34): each job runs on a thread of its own, so a
// job that runs long (a housekeeping run) does not hold another (the pending-action job), and
// stop() hands the long one its stop request instead of waiting for it to end by itself.
#define BOOST_TEST_MODULE seqinbox relay job schedule
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

#include "job_schedule.hpp"

using namespace std::chrono_literals;
using seqinbox::relay::detail::job_schedule;

namespace {

/// Blocks until `stop` is requested, at most 30 s; whether the stop came.
bool hold_until_stopped(const std::stop_token& stop) {
    std::mutex mutex;
    std::condition_variable_any woken;
    std::unique_lock lock(mutex);
    return woken.wait_for(lock, stop, 30s, [&] { return stop.stop_requested(); });
}

double seconds_since(std::chrono::steady_clock::time_point t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_long_job_holds_neither_the_other_job_nor_stop) {
    std::atomic<int> quick_runs{0};
    std::atomic<bool> long_running{false};
    std::atomic<bool> long_stopped{false};
    job_schedule schedule({
        {10ms, [&](std::stop_token stop) {
             long_running = true;
             long_stopped = hold_until_stopped(stop);
         }},
        {10ms, [&](std::stop_token) { ++quick_runs; }},
    });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!long_running && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    BOOST_TEST_REQUIRE(long_running.load());
    const int before = quick_runs;
    std::this_thread::sleep_for(500ms);
    BOOST_TEST(quick_runs - before >= 5, quick_runs - before << " quick runs in 0.5 s while the long job ran");

    const auto asked = std::chrono::steady_clock::now();
    schedule.stop();
    BOOST_TEST(seconds_since(asked) < 10, "stop() took " << seconds_since(asked) << " s");
    BOOST_TEST(long_stopped.load(), "the long job saw its stop request");
    const int after = quick_runs;
    std::this_thread::sleep_for(50ms);
    BOOST_TEST(quick_runs == after, "no job runs after stop()");
}
