// basic_housekeeper::run_once(stop_token) on the memory store (issue 34): a stop request ends a
// long, paced run after the batch in progress — its pause cut short — and the run reports
// itself stopped and incomplete; the jobs after it do not start; the next run resumes.
#define BOOST_TEST_MODULE seqinbox housekeeper stop
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"

namespace si = seqinbox;
using namespace std::chrono_literals;

namespace {

/// A logger whose every line takes 20 ms: the marking job logs a warning per instance it marks,
/// so its batches take that long and the pace (work share 1 %) pauses about 2 s after each.
struct slow_logger {
    bool enabled(si::log_level) const { return true; }
    void log(si::log_level, std::string_view) { std::this_thread::sleep_for(20ms); }
};

using housekeeper = si::basic_housekeeper<si::memory::store, si::memory::error_sink, si::clock::system_clock, slow_logger>;

constexpr std::size_t expired = 20;

void create_expired_instances(si::memory::store& store) {
    const auto now = std::chrono::system_clock::now();
    for (std::size_t i = 0; i < expired; ++i)
        store.create_or_get_instance("OrderSequence", "o" + std::to_string(i), now - 48h, now - 24h);
}

double seconds_since(std::chrono::steady_clock::time_point t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_stop_request_ends_a_paced_run_within_its_pause_and_the_next_run_resumes) {
    si::memory::store store;
    si::memory::error_sink sink;
    create_expired_instances(store);
    housekeeper paced(store, sink, {.removal_delay = 0s, .batch_size = 1, .work_share = 0.01});

    std::stop_source stop;
    auto run = std::async(std::launch::async, [&] { return paced.run_once(stop.get_token()); });
    std::this_thread::sleep_for(300ms);  // the first marking batch is done, its pause (about 2 s) begun
    const auto asked = std::chrono::steady_clock::now();
    stop.request_stop();
    BOOST_TEST_REQUIRE((run.wait_for(10s) == std::future_status::ready), "run_once did not return within 10 s of the stop request");
    const auto report = run.get();
    BOOST_TEST_MESSAGE("returned " << seconds_since(asked) << " s after the stop request, " << report.marked << " marked");
    BOOST_TEST(report.stopped);
    BOOST_TEST(!report.complete);
    BOOST_TEST(report.marked >= 1u);
    BOOST_TEST(report.marked < expired);
    BOOST_TEST_REQUIRE(report.jobs.size() == 2u, "closed cleanup and marking ran; removal did not start");
    BOOST_TEST(report.jobs.back().job == "expiry_marking");
    BOOST_TEST(!report.jobs.back().complete);
    BOOST_TEST(report.expired_removed == 0u);

    housekeeper unpaced(store, sink, {.removal_delay = 0s, .batch_size = 1, .work_share = 1});
    const auto rest = unpaced.run_once();
    BOOST_TEST(rest.complete);
    BOOST_TEST(!rest.stopped);
    BOOST_TEST(report.marked + rest.marked == expired, "the next run marks the rest");
    BOOST_TEST(rest.expired_removed == expired);
}

BOOST_AUTO_TEST_CASE(a_stop_requested_before_the_run_runs_no_job) {
    si::memory::store store;
    si::memory::error_sink sink;
    create_expired_instances(store);
    housekeeper h(store, sink, {.removal_delay = 0s});
    std::stop_source stop;
    stop.request_stop();
    const auto report = h.run_once(stop.get_token());
    BOOST_TEST(report.jobs.empty());
    BOOST_TEST(report.stopped);
    BOOST_TEST(!report.complete);
    BOOST_TEST(report.marked == 0u);
}
