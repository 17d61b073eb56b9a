#pragma once
// The conformance suite's cases on the instance view (seqinbox/store/views.hpp): one page of an
// instance's messages at a time, whatever their number, and a cursor that walks them all. Included
// by each backend's test_conformance.cpp after it defines `backends`.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "conformance/harness.hpp"
#include "seqinbox/store/views.hpp"

namespace seqinbox::conformance::views {

/// Messages of o1 in turn WAITING, PROCESSED and FAILED, with a message of o2 after every fourth,
/// so that o1's ids are not contiguous. Returns o1's message ids, ascending. (PostgreSQL sends an
/// inserted row on its own: a few milliseconds each.)
template <class B>
std::vector<message_id> many_messages(B& b, std::size_t count) {
    constexpr message_state states[] = {message_state::waiting, message_state::processed, message_state::failed};
    const auto o1 = order_row(b, "o1", "OrderShipped", "first", message_state::waiting).instance;
    const auto other = order_row(b, "o2", "OrderShipped", "first", message_state::waiting);
    auto tx = b.store.begin();
    for (std::size_t k = 0; k < count; ++k) {
        auto row = order_row(b, "o1", "OrderShipped", "m-" + std::to_string(k), states[k % 3]);
        tx.insert_message(row);
        if (k % 4 != 0) continue;
        row = other;
        row.idempotence_id = "n-" + std::to_string(k);
        tx.insert_message(row);
    }
    tx.commit();
    std::vector<message_id> ids;
    for (const auto& row : b.messages())
        if (row.instance == o1) ids.push_back(row.id);
    BOOST_TEST_REQUIRE(ids.size() == count);
    return ids;
}

inline std::vector<message_id> ids_of(const instance_view& view) {
    std::vector<message_id> ids;
    for (const auto& m : view.messages) ids.push_back(m.id);
    return ids;
}

}  // namespace seqinbox::conformance::views

BOOST_AUTO_TEST_SUITE(instance_view_pages)

// Issue 34: the view held every message (43 MB of JSON for 200,000), now the first page.
BOOST_AUTO_TEST_CASE_TEMPLATE(an_instance_view_holds_the_first_page_of_its_messages, Backend, backends) {
    namespace conf = seqinbox::conformance;
    Backend b;
    const auto ids = conf::views::many_messages(b, 1'200);
    const auto o1 = conf::instance_id_of(b, "o1");
    const auto by_id = b.store.view_instance(o1);
    BOOST_TEST_REQUIRE(by_id.has_value());
    BOOST_TEST(by_id->messages.size() == seqinbox::default_message_page);
    const std::vector<seqinbox::message_id> first(ids.begin(), ids.begin() + seqinbox::default_message_page);
    BOOST_TEST(conf::views::ids_of(*by_id) == first, boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(by_id->next.has_value());
    BOOST_TEST(*by_id->next == first.back());
    BOOST_TEST(by_id->counts.waiting == 400u);
    BOOST_TEST(by_id->counts.processed == 400u);
    BOOST_TEST(by_id->counts.failed == 400u);
    BOOST_TEST(by_id->counts.total() == 1'200u);

    const auto by_name = b.store.view_instance(conf::order_sequence, "o1");
    BOOST_TEST_REQUIRE(by_name.has_value());
    BOOST_TEST(conf::views::ids_of(*by_name) == first, boost::test_tools::per_element());
    BOOST_TEST((by_name->next == by_id->next));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(the_cursor_walks_every_message_once_in_id_order, Backend, backends) {
    namespace conf = seqinbox::conformance;
    namespace si = seqinbox;
    Backend b;
    const auto ids = conf::views::many_messages(b, 1'200);
    const auto o1 = conf::instance_id_of(b, "o1");
    for (const std::size_t limit : {std::size_t{400}, std::size_t{1'000}, std::size_t{7}}) {  // 400: the last page is full
        std::vector<si::message_id> walked;
        si::message_page page{.limit = limit};
        std::size_t pages = 0;
        for (;; ++pages) {
            const auto view = b.store.view_instance(o1, page);
            BOOST_TEST_REQUIRE(view.has_value());
            BOOST_TEST_REQUIRE(view->messages.size() <= limit);
            for (const auto& m : view->messages) walked.push_back(m.id);
            if (!view->next) break;
            BOOST_TEST_REQUIRE(view->messages.size() == limit);
            BOOST_TEST_REQUIRE(*view->next == view->messages.back().id);
            page.after = *view->next;
        }
        BOOST_TEST(pages + 1 == (1'200 + limit - 1) / limit, "limit " << limit);
        BOOST_TEST(walked == ids, boost::test_tools::per_element());
    }
    const auto middle = b.store.view_instance(conf::order_sequence, "o1", {.limit = 3, .after = ids[1'000]});
    BOOST_TEST_REQUIRE(middle.has_value());
    BOOST_TEST(conf::views::ids_of(*middle) == (std::vector<si::message_id>{ids[1'001], ids[1'002], ids[1'003]}), boost::test_tools::per_element());
    const auto past_the_end = b.store.view_instance(o1, {.limit = 10, .after = ids.back()});
    BOOST_TEST_REQUIRE(past_the_end.has_value());
    BOOST_TEST(past_the_end->messages.empty());
    BOOST_TEST(!past_the_end->next.has_value());
    BOOST_TEST(past_the_end->counts.total() == 1'200u);  // counts are the instance's, not the page's
}

// A page holds the requests on its own messages only: their number is bounded by the page too.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_page_holds_the_pending_actions_of_its_messages_and_of_the_instance, Backend, backends) {
    namespace conf = seqinbox::conformance;
    namespace si = seqinbox;
    Backend b;
    const auto ids = conf::views::many_messages(b, 300);
    const auto o1 = conf::instance_id_of(b, "o1");
    BOOST_TEST(si::accepted(b.store.request_message_action(ids[3], si::message_action::consume, b.clock.now())));    // WAITING, page 1
    BOOST_TEST(si::accepted(b.store.request_message_action(ids[150], si::message_action::expire, b.clock.now())));   // WAITING, page 2
    BOOST_TEST(si::accepted(b.store.request_instance_action(o1, si::instance_action::close, b.clock.now())));
    const auto first = b.store.view_instance(o1, {.limit = 100});
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST_REQUIRE(first->actions.on_messages.size() == 1u);
    BOOST_TEST(first->actions.on_messages[0].message == ids[3]);
    BOOST_TEST(first->actions.on_instance.has_value());
    const auto second = b.store.view_instance(o1, {.limit = 100, .after = *first->next});
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST_REQUIRE(second->actions.on_messages.size() == 1u);
    BOOST_TEST(second->actions.on_messages[0].message == ids[150]);
    BOOST_TEST((second->actions.on_messages[0].action == si::message_action::expire));
    BOOST_TEST(second->actions.on_instance.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- read views through the engine ----

BOOST_AUTO_TEST_SUITE(sequential_inbox)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_each;
using conf::expect_calls;
using conf::expect_outcome;
using conf::expect_rows;
using conf::fail_first;
using conf::harness;
using si::outcome;

BOOST_AUTO_TEST_CASE_TEMPLATE(read_views_count_list_and_show, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    const si::timestamp start = b.clock.now();
    conf::buffer_three(h);
    conf::complete_order(h, "o2");

    conf::strings instances, messages;
    for (const auto& c : b.store.instance_counts()) instances.push_back(c.sequence + " " + std::string(to_string(c.state)) + " " + std::to_string(c.count));
    for (const auto& c : b.store.message_counts()) messages.push_back(c.type + " " + std::string(to_string(c.state)) + " " + std::to_string(c.count));
    BOOST_TEST(instances == (conf::strings{"OrderSequence OPEN 1", "OrderSequence CLOSED 1"}), boost::test_tools::per_element());
    BOOST_TEST(messages == (conf::strings{"OrderCreated PROCESSED 1", "OrderExpedited PROCESSED 1", "OrderPrepared WAITING 1",
                                          "OrderPrepared PROCESSED 1", "OrderShipped WAITING 1", "OrderShipped PROCESSED 1",
                                          "OrderValidated WAITING 1", "OrderValidated PROCESSED 1"}),
               boost::test_tools::per_element());

    // Retention 24 h: expiring from 18 h on (share 0.75), expired after 24 h; closed ones never.
    BOOST_TEST(b.store.expiring_instances(start + 17h, 0.75, 10).empty());
    const auto expiring = b.store.expiring_instances(start + 18h, 0.75, 10);
    BOOST_TEST_REQUIRE(expiring.size() == 1u);
    BOOST_TEST(expiring[0].context_id == "o1");
    BOOST_TEST(b.store.expired_instances(start + 24h, 10).empty());
    const auto expired = b.store.expired_instances(start + 24h + 1s, 10);
    BOOST_TEST_REQUIRE(expired.size() == 1u);
    BOOST_TEST(expired[0].context_id == "o1");
    BOOST_TEST(b.store.expiring_instances(start + 24h + 1s, 0.75, 10).empty());
    auto retention = [&](si::timestamp at) {
        const auto counts = b.store.retention_counts(at, 0.75);
        BOOST_TEST_REQUIRE(counts.size() == 1u);  // the closed o2 is not counted, but o1's sequence is
        BOOST_TEST(counts[0].sequence == conf::order_sequence);
        return std::pair(counts[0].expiring, counts[0].expired);
    };
    BOOST_TEST((retention(start + 17h) == std::pair<std::size_t, std::size_t>(0, 0)));
    BOOST_TEST((retention(start + 18h) == std::pair<std::size_t, std::size_t>(1, 0)));
    BOOST_TEST((retention(start + 24h + 1s) == std::pair<std::size_t, std::size_t>(0, 1)));

    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(conf::message_id_of(b, "OrderValidated", "v1"), si::message_action::consume, start)));
    const auto view = b.store.view_instance(conf::order_sequence, "o1");
    BOOST_TEST_REQUIRE(view.has_value());
    BOOST_TEST(view->instance.context_id == "o1");
    conf::strings rows;
    for (const auto& m : view->messages) rows.push_back(m.type + "/" + m.idempotence_id + " " + std::string(to_string(m.state)));
    BOOST_TEST(rows == (conf::strings{"OrderValidated/v1 WAITING", "OrderPrepared/p1 WAITING", "OrderShipped/s1 WAITING"}),
               boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(view->actions.on_messages.size() == 1u);
    BOOST_TEST(view->actions.on_messages[0].message == view->messages[0].id);
    BOOST_TEST(!b.store.view_instance(conf::order_sequence, "nope").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
