// User code that throws (extractor, filter, resolver, listener) never makes a delivery loop
// forever: it ends rejected or failed, in the error sink, and is acknowledged.
#define BOOST_TEST_MODULE user_code_failures
#include <boost/test/unit_test.hpp>

#include <stdexcept>

#include "polling_world.hpp"
#include "seqinbox/memory/testing.hpp"

using namespace seqinbox;
using world = testing::polling_world;
using testing::single;

BOOST_AUTO_TEST_CASE(a_throwing_context_id_extractor_rejects_the_delivery) {
    world w;
    auto m = testing::declare("OrderCreated");
    m.context_id = [](const testing::message&, const envelope&) -> std::optional<std::string> {
        throw std::runtime_error("payload has no order id");
    };
    auto inbox = w.make(single(std::move(m)));
    auto result = w.poll(*inbox, testing::record("OrderCreated", "c1", "o1"));
    BOOST_TEST((result.outcome == outcome::rejected));
    BOOST_TEST_REQUIRE(w.sink.size() == 1u);
    BOOST_TEST(w.sink.records()[0].reason.find("payload has no order id") != std::string::npos);
    BOOST_TEST(w.store.messages().empty());
    BOOST_TEST(w.calls.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_throwing_filter_rejects_the_delivery) {
    world w;
    auto m = testing::declare("OrderCreated");
    m.filter = [](const testing::message&, const envelope&) -> bool { throw std::runtime_error("filter broke"); };
    auto inbox = w.make(single(std::move(m)));
    BOOST_TEST((w.poll(*inbox, testing::record("OrderCreated", "c1", "o1")).outcome == outcome::rejected));
    BOOST_TEST(w.sink.records().at(0).reason.find("filter broke") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_throwing_subtype_resolver_rejects_the_delivery) {
    world w;
    auto decls = single(testing::declare("Check", {}, "X"));
    decls.resolvers["Check"] = {[](const testing::message&, const envelope&) -> std::string { throw 42; }, {"X"}};
    auto inbox = w.make(std::move(decls));
    BOOST_TEST((w.poll(*inbox, testing::record("Check", "k1", "o1")).outcome == outcome::rejected));
    BOOST_TEST(w.sink.records().at(0).reason.find("not a std::exception") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_listener_throwing_a_non_standard_exception_fails_cleanly) {
    world w;
    auto inbox = std::make_unique<memory::inbox>(w.store, w.source, w.sink, single(testing::declare("OrderCreated")));
    inbox->on("OrderCreated", [](const testing::message&, const memory::inbox::context&) { throw 7; });
    auto result = w.poll(*inbox, testing::record("OrderCreated", "c1", "o1"));
    BOOST_TEST((result.outcome == outcome::failed));
    BOOST_TEST(w.sink.records().at(0).reason.find("listener failed") != std::string::npos);
    BOOST_TEST(!memory::testing::has_claim(w.store, {"OrderCreated", "c1"}));  // rolled back: a resend retries
    BOOST_TEST((w.store.messages().at(0).state == message_state::failed));
}

BOOST_AUTO_TEST_CASE(a_missing_listener_is_a_misuse_reported_before_any_delivery) {
    world w;
    memory::inbox inbox(w.store, w.source, w.sink, testing::order_declarations());
    inbox.on("OrderCreated", [](const testing::message&, const memory::inbox::context&) {});
    try {
        inbox.deliver(testing::record("OrderCreated", "c1", "o1"));
        BOOST_FAIL("expected a misuse error");
    } catch (const seqinbox::error& e) {
        BOOST_TEST((e.category() == error_category::misuse));
        BOOST_TEST(std::string(e.what()).find("OrderShipped") != std::string::npos);
    }
    BOOST_TEST(w.store.instances().empty());
}
