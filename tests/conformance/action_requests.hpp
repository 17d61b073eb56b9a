#pragma once
// The conformance suite, operator action requests under a delivery's lock (issue 34): a request
// waits for the row a short while only (the store's request lock timeout, 2 s by default), then
// throws request_locked, retryable, naming the row; the same request succeeds once the lock is
// released. Include it after defining `backends`, as behaviour.hpp.
#include <chrono>
#include <string>

#include <boost/test/unit_test.hpp>

#include "conformance/harness.hpp"
#include "seqinbox/store/actions.hpp"

BOOST_AUTO_TEST_SUITE(action_requests)

BOOST_AUTO_TEST_CASE_TEMPLATE(a_request_on_a_locked_instance_gives_up_after_the_request_lock_timeout, Backend, backends) {
    namespace conf = seqinbox::conformance;
    namespace si = seqinbox;
    Backend b;
    conf::harness<Backend> h(b);
    conf::buffer_three(h);
    const auto instance = conf::instance_id_of(b, "o1");
    {
        auto delivery = b.store.begin();
        delivery.lock_instance(instance);  // as a delivery holds it while its listeners run
        const auto asked = std::chrono::steady_clock::now();
        try {
            (void)b.store.request_instance_action(instance, si::instance_action::close, b.clock.now());
            BOOST_TEST(false, "the request did not wait for the instance lock");
        } catch (const si::error& e) {
            BOOST_TEST((e.category() == si::error_category::retryable));
            BOOST_TEST(e.sqlstate() == "55P03");
            BOOST_TEST(std::string(e.what()) == "instance " + std::to_string(instance) + " is locked by a delivery in progress; try again");
        }
        const auto waited = std::chrono::steady_clock::now() - asked;
        BOOST_TEST((waited >= std::chrono::milliseconds(1500) && waited < std::chrono::seconds(10)),
                   std::chrono::duration<double>(waited).count() << " s");
        delivery.rollback();
    }
    BOOST_TEST(si::accepted(b.store.request_instance_action(instance, si::instance_action::close, b.clock.now())));
}

BOOST_AUTO_TEST_SUITE_END()
