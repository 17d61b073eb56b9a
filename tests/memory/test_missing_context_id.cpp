// docs/processing.md step 2: a message whose extractor returns no context id follows its type's declared
// policy: `handle` (the library's default) invokes the listener directly like a filtered
// message; `dead_letter` sends it to the error sink as a bad message, naming the type.
#define BOOST_TEST_MODULE missing_context_id
#include <boost/test/unit_test.hpp>

#include "polling_world.hpp"
#include "support/print_record_bytes.hpp"

using namespace seqinbox;

namespace {

struct world : testing::polling_world {
    std::unique_ptr<memory::inbox> inbox;

    explicit world(message_declaration<testing::message> m) : inbox(make(testing::single(std::move(m)))) {}

    delivery_result poll(const envelope& e) { return polling_world::poll(*inbox, e); }

    void expect_nothing_stored() const {
        BOOST_TEST(store.messages().empty());
        BOOST_TEST(store.instances().empty());
        BOOST_TEST(store.claim_count() == 0u);
    }
};

message_declaration<testing::message> with_policy(missing_context_id_policy policy) {
    auto m = testing::declare("OrderCreated");
    m.missing_context_id = policy;
    return m;
}

const envelope without_context = testing::record("OrderCreated", "c1", "");  // empty key: the extractor returns none

}  // namespace

BOOST_AUTO_TEST_CASE(the_library_default_is_handle) {
    BOOST_TEST((message_declaration<testing::message>{}.missing_context_id == missing_context_id_policy::handle));
}

BOOST_AUTO_TEST_CASE(handle_invokes_the_listener_directly_and_stores_nothing) {
    world w(with_policy(missing_context_id_policy::handle));
    BOOST_TEST((w.poll(without_context).outcome == outcome::not_sequenced));
    BOOST_TEST_REQUIRE(w.calls.size() == 1u);
    BOOST_TEST(w.calls.calls()[0].context_id == "");
    BOOST_TEST(w.sink.size() == 0u);
    w.expect_nothing_stored();
}

BOOST_AUTO_TEST_CASE(dead_letter_sends_the_delivery_to_the_error_sink_with_a_reason_naming_the_type) {
    world w(with_policy(missing_context_id_policy::dead_letter));
    const auto result = w.poll(without_context);
    BOOST_TEST((result.outcome == outcome::rejected));
    BOOST_TEST(result.qualified_type == "OrderCreated");
    BOOST_TEST(w.calls.size() == 0u, "the listener is not called");
    BOOST_TEST_REQUIRE(w.sink.size() == 1u);
    const auto failure = w.sink.records()[0];
    BOOST_TEST(failure.reason == "no context id: the extractor of message type 'OrderCreated' returned none, and its policy "
                                 "for a missing context id is dead-letter");
    BOOST_TEST(failure.qualified_type == "OrderCreated");
    BOOST_TEST(failure.idempotence_id == "c1");
    BOOST_TEST(failure.original.value == without_context.value);
    w.expect_nothing_stored();
}

BOOST_AUTO_TEST_CASE(dead_letter_treats_an_empty_context_id_as_missing) {
    auto m = with_policy(missing_context_id_policy::dead_letter);
    m.context_id = [](const testing::message&, const envelope&) { return std::optional<std::string>(""); };
    world w(std::move(m));
    BOOST_TEST((w.poll(testing::record("OrderCreated", "c1", "o1")).outcome == outcome::rejected));
    BOOST_TEST(w.sink.size() == 1u);
    BOOST_TEST(w.calls.size() == 0u);
}

BOOST_AUTO_TEST_CASE(dead_letter_leaves_filtered_messages_and_those_with_a_context_id_alone) {
    auto m = with_policy(missing_context_id_policy::dead_letter);
    m.filter = [](const testing::message& value, const envelope&) { return value != "unsequenced"; };
    world w(std::move(m));
    BOOST_TEST((w.poll(testing::record("OrderCreated", "c1", "", "unsequenced")).outcome == outcome::not_sequenced));
    BOOST_TEST((w.poll(testing::record("OrderCreated", "c2", "o1")).outcome == outcome::processed));
    BOOST_TEST(w.calls.size() == 2u);
    BOOST_TEST(w.sink.size() == 0u);
}
