// The relay's record router (private header): a consumer thread's queue holds the records routed
// to it in order; the poller goes on taking records while a thread has less than a batch queued,
// so a partition's run of records for one thread (librdkafka hands out a partition's fetched
// records together) does not starve the others; a byte bound stops it; stop() wakes everyone.
#define BOOST_TEST_MODULE seqinbox relay record router
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "record_router.hpp"

namespace {

using seqinbox::envelope;
using seqinbox::relay::detail::record_router;
using namespace std::chrono_literals;

envelope record(std::int64_t offset) {
    envelope e;
    e.key = "k";
    e.value = std::string(100, 'v');
    e.offset = offset;
    return e;
}

/// `count` records for thread `thread` of `threads`, from offset `first` on.
std::vector<std::vector<envelope>> run_for(std::size_t thread, std::size_t threads, std::size_t count, std::int64_t first = 0) {
    std::vector<std::vector<envelope>> by_thread(threads);
    for (std::size_t i = 0; i < count; ++i) by_thread[thread].push_back(record(first + static_cast<std::int64_t>(i)));
    return by_thread;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_thread_takes_its_records_in_order_at_most_a_batch_at_a_time) {
    record_router router(2, 3, 1 << 20);
    router.push(run_for(1, 2, 5));
    const auto first = router.take(1, 3, 0ms, 0ms);
    BOOST_TEST_REQUIRE(first.size() == 3u);
    for (std::int64_t i = 0; i < 3; ++i) BOOST_TEST(first[static_cast<std::size_t>(i)].offset == i);
    BOOST_TEST(router.take(1, 3, 0ms, 0ms).size() == 2u);
    BOOST_TEST(router.take(0, 3, 0ms, 0ms).empty());
}

BOOST_AUTO_TEST_CASE(a_run_of_one_threads_records_does_not_stop_the_poller_while_another_thread_waits) {
    record_router router(4, 250, std::size_t{64} << 20);
    router.push(run_for(0, 4, 5000));  // a partition's fetched run, all of one thread's contexts
    BOOST_TEST(router.wait_for_room(0ms), "threads 1 to 3 have nothing queued: the poller must take more");
    for (std::size_t n = 1; n < 4; ++n) router.push(run_for(n, 4, 250));
    BOOST_TEST(!router.wait_for_room(0ms), "every thread has a batch queued");
    BOOST_TEST(router.take(2, 250, 0ms, 0ms).size() == 250u);
    BOOST_TEST(router.wait_for_room(0ms));
}

BOOST_AUTO_TEST_CASE(the_byte_bound_stops_the_poller_whatever_the_queues) {
    record_router router(2, 250, 10'000);  // about 60 records of 100-byte values
    router.push(run_for(0, 2, 100));
    BOOST_TEST(!router.wait_for_room(0ms), "past the byte bound, with thread 1's queue empty");
    router.take(0, 250, 0ms, 0ms);
    BOOST_TEST(router.wait_for_room(0ms));
}

BOOST_AUTO_TEST_CASE(stop_wakes_a_waiting_thread_and_leaves_the_queued_records_to_take_all) {
    record_router router(2, 250, 1 << 20);
    router.push(run_for(0, 2, 7));
    std::thread waiter([&] { BOOST_TEST(router.take(1, 250, 10s, 0ms).empty()); });
    std::this_thread::sleep_for(50ms);
    const auto started = std::chrono::steady_clock::now();
    router.stop();
    waiter.join();
    BOOST_TEST((std::chrono::steady_clock::now() - started < 5s));
    BOOST_TEST(!router.wait_for_room(0ms));
    BOOST_TEST(router.take_all().size() == 7u);
}
