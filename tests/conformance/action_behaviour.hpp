#pragma once
// The conformance suite, operator actions through the engine (seqinbox/store/actions.hpp) and the
// finds and lists an operator reads (seqinbox/store/views.hpp). Include it after
// conformance/behaviour.hpp and conformance/batch_behaviour.hpp.
#include <boost/test/unit_test.hpp>

#include "conformance/harness.hpp"

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

// ---- operator actions ----

BOOST_AUTO_TEST_CASE_TEMPLATE(consume_replays_a_waiting_message_whatever_its_condition, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    buffer_three(h);
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(conf::message_id_of(b, "OrderValidated", "v1"), si::message_action::consume, b.clock.now())));
    BOOST_TEST(h.log.size() == 0u);  // pending until the job runs
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    expect_calls(h.log, {"OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    expect_rows(b, "OrderShipped", "s1", {"WAITING"});  // still needs Prepared
    BOOST_TEST(h.inbox->run_pending_actions() == 0u);    // executed actions are cleared

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 2);  // Prepared, then Shipped; not v1 again
    expect_calls(h.log, {"OrderValidated/v1 (replayed)", "OrderCreated/c1", "OrderPrepared/p1 (replayed)", "OrderShipped/s1 (replayed)"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expire_marks_processed_unreplayed_and_releases_what_it_unblocks, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    buffer_three(h);
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v1"}, {"OrderPrepared", "p1"}})
        BOOST_TEST(seqinbox::accepted(b.store.request_message_action(conf::message_id_of(b, type, id), si::message_action::expire, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 2u);
    expect_calls(h.log, {"OrderShipped/s1 (replayed)"});  // its predecessors were expired, not replayed
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v1"}, {"OrderPrepared", "p1"}, {"OrderShipped", "s1"}})
        expect_rows(b, type, id, {"PROCESSED"});
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN");  // Created and Expedited never came
}

BOOST_AUTO_TEST_CASE_TEMPLATE(consume_all_replays_every_waiting_message_then_closes_when_complete, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    buffer_three(h);
    expect_outcome(h.deliver("OrderExpedited", "e1", "o1"), outcome::buffered);
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(conf::instance_id_of(b, "o1"), si::instance_action::consume_all, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    // Shipped's condition names Expedited: e1 before s1, although s1 arrived first.
    expect_calls(h.log, {"OrderValidated/v1 (replayed)", "OrderPrepared/p1 (replayed)", "OrderExpedited/e1 (replayed)",
                         "OrderShipped/s1 (replayed)"});
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN");  // OrderCreated is still missing
    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::processed);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(close_closes_without_replay_and_requests_need_a_live_target, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    buffer_three(h);
    const auto instance = conf::instance_id_of(b, "o1");
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(instance, si::instance_action::close, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    BOOST_TEST(h.log.size() == 0u);
    expect_rows(b, "OrderValidated", "v1", {"WAITING"});

    BOOST_TEST(b.store.request_instance_action(instance, si::instance_action::consume_all, b.clock.now()) == si::request_outcome::wrong_state);
    BOOST_TEST(b.store.request_instance_action(instance + 1000, si::instance_action::close, b.clock.now()) == si::request_outcome::not_found);
    expect_outcome(h.deliver("OrderCreated", "c2", "o2"), outcome::processed);
    BOOST_TEST(b.store.request_message_action(conf::message_id_of(b, "OrderCreated", "c2"), si::message_action::consume, b.clock.now()) ==
               si::request_outcome::wrong_state);  // PROCESSED
    BOOST_TEST(b.store.request_message_action(999'999, si::message_action::expire, b.clock.now()) == si::request_outcome::not_found);
    BOOST_TEST(h.inbox->run_pending_actions() == 0u);
}

/// v1 of o1 buffered, then FAILED on its release (its listener threw once), its record kept.
template <class H, class B>
si::message_id failed_release_of_v1(H& h, B& b) {
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::processed);
    expect_rows(b, "OrderValidated", "v1", {"FAILED"});
    BOOST_TEST_REQUIRE(!b.has_claim({"OrderValidated", "v1"}));
    return conf::message_id_of(b, "OrderValidated", "v1");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(consume_replays_a_failed_message_from_its_record_and_a_resend_is_then_a_duplicate, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderValidated", 1, true));
    const auto v1 = failed_release_of_v1(h, b);
    BOOST_TEST(b.store.request_message_action(v1, si::message_action::consume, b.clock.now()) == si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    BOOST_TEST(b.has_claim({"OrderValidated", "v1"}));  // claimed again: a resend is a duplicate
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::duplicate);
    BOOST_TEST(h.log.count("OrderValidated", "v1") == 1u);
    BOOST_TEST(b.error_sink.size() == 1u);  // the release failure only
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_consume_of_a_failed_message_that_fails_again_leaves_it_retryable, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderValidated", 2, true));
    const auto v1 = failed_release_of_v1(h, b);
    BOOST_TEST(b.store.request_message_action(v1, si::message_action::consume, b.clock.now()) == si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);  // it ran, and failed
    expect_rows(b, "OrderValidated", "v1", {"FAILED"});
    BOOST_TEST(!b.has_claim({"OrderValidated", "v1"}));  // the claim it took is gone with the failure
    BOOST_TEST(b.error_sink.size() == 2u);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::processed);  // a resend retries
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expire_of_a_failed_message_lets_its_successors_run, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderValidated", 1, true));
    const auto v1 = failed_release_of_v1(h, b);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::processed);
    expect_outcome(h.deliver("OrderShipped", "s1", "o1"), outcome::buffered);  // needs Validated
    BOOST_TEST(b.store.request_message_action(v1, si::message_action::expire, b.clock.now()) == si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    expect_rows(b, "OrderShipped", "s1", {"PROCESSED"});
    expect_calls(h.log, {"OrderCreated/c1", "OrderPrepared/p1", "OrderShipped/s1 (replayed)"});
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::duplicate);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_direct_failure_has_no_record_to_act_on, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderCreated"));
    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::failed);
    expect_rows(b, "OrderCreated", "c1", {"FAILED"});
    const auto c1 = conf::message_id_of(b, "OrderCreated", "c1");
    BOOST_TEST(b.store.request_message_action(c1, si::message_action::consume, b.clock.now()) == si::request_outcome::no_record);
    BOOST_TEST(b.store.request_message_action(c1, si::message_action::expire, b.clock.now()) == si::request_outcome::no_record);
    BOOST_TEST(h.inbox->run_pending_actions() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(message_actions_run_in_a_closed_instance_and_only_what_ran_counts, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    conf::buffer_three(h);
    const auto o1 = conf::instance_id_of(b, "o1");
    BOOST_TEST(b.store.request_instance_action(o1, si::instance_action::close, b.clock.now()) == si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");

    const auto v1 = conf::message_id_of(b, "OrderValidated", "v1");
    BOOST_TEST(b.store.request_message_action(v1, si::message_action::consume, b.clock.now()) == si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    expect_calls(h.log, {"OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    expect_rows(b, "OrderShipped", "s1", {"WAITING"});  // a CLOSED instance releases nothing by itself
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");

    // CONSUME and CLOSE together: the CONSUME runs first, both count.
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v2"}, {"OrderPrepared", "p2"}})
        expect_outcome(h.deliver(type, id, "o2"), outcome::buffered);
    BOOST_TEST(b.store.request_instance_action(conf::instance_id_of(b, "o2"), si::instance_action::close, b.clock.now()) ==
               si::request_outcome::accepted);
    BOOST_TEST(b.store.request_message_action(conf::message_id_of(b, "OrderPrepared", "p2"), si::message_action::consume, b.clock.now()) ==
               si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 2u);
    expect_calls(h.log, {"OrderValidated/v1 (replayed)", "OrderPrepared/p2 (replayed)"});
    BOOST_TEST(conf::instance_state_of(b, "o2") == "CLOSED");
    expect_rows(b, "OrderValidated", "v2", {"WAITING"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(consume_all_replays_in_the_conditions_order_not_in_arrival_order, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    for (const auto& [type, id] : {std::pair{"OrderShipped", "s1"}, {"OrderPrepared", "p1"}, {"OrderValidated", "v1"}})
        expect_outcome(h.deliver(type, id, "o1"), outcome::buffered);
    BOOST_TEST(b.store.request_instance_action(conf::instance_id_of(b, "o1"), si::instance_action::consume_all, b.clock.now()) ==
               si::request_outcome::accepted);
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    // Shipped names Validated and Prepared: it comes last; Prepared arrived before Validated.
    expect_calls(h.log, {"OrderPrepared/p1 (replayed)", "OrderValidated/v1 (replayed)", "OrderShipped/s1 (replayed)"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(messages_and_instances_are_found_by_key_and_by_id, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    conf::buffer_three(h);
    const auto o1 = conf::instance_id_of(b, "o1");
    const auto v1 = conf::message_id_of(b, "OrderValidated", "v1");

    const auto by_id = b.store.find_message(v1);
    BOOST_TEST_REQUIRE(by_id.has_value());
    BOOST_TEST(by_id->message.type == "OrderValidated");
    BOOST_TEST(by_id->message.idempotence_id == "v1");
    BOOST_TEST((by_id->message.state == si::message_state::waiting));
    BOOST_TEST(!by_id->message.payload.has_value());
    BOOST_TEST(by_id->instance.id == o1);
    BOOST_TEST(by_id->instance.context_id == "o1");
    BOOST_TEST(!by_id->pending.has_value());

    BOOST_TEST(si::request_message_action(b.store, si::claim_key{"OrderValidated", "v1"}, si::message_action::expire, b.clock.now()) ==
               si::request_outcome::accepted);
    const auto by_key = b.store.find_message(si::claim_key{"OrderValidated", "v1"});
    BOOST_TEST_REQUIRE(by_key.has_value());
    BOOST_TEST(by_key->message.id == v1);
    BOOST_TEST_REQUIRE(by_key->pending.has_value());
    BOOST_TEST((by_key->pending->action == si::message_action::expire));

    BOOST_TEST(!b.store.find_message(si::claim_key{"OrderValidated", "nope"}).has_value());
    BOOST_TEST(!b.store.find_message(si::message_id{999'999}).has_value());
    BOOST_TEST(si::request_message_action(b.store, si::claim_key{"OrderValidated", "nope"}, si::message_action::consume, b.clock.now()) ==
               si::request_outcome::not_found);

    const auto view = b.store.view_instance(o1);
    BOOST_TEST_REQUIRE(view.has_value());
    BOOST_TEST(view->instance.context_id == "o1");
    BOOST_TEST(view->messages.size() == 3u);
    BOOST_TEST(view->actions.on_messages.size() == 1u);
    BOOST_TEST(!b.store.view_instance(o1 + 1000).has_value());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(waiting_longest_lists_instances_by_their_oldest_waiting_message, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    const auto start = b.clock.now();
    expect_outcome(h.deliver("OrderShipped", "s2", "o2"), outcome::buffered);
    b.clock.advance(std::chrono::minutes(1));
    conf::buffer_three(h);  // o1: three WAITING, the oldest a minute younger than o2's
    expect_outcome(h.deliver("OrderCreated", "c3", "o3"), outcome::processed);  // nothing waits
    const auto rows = b.store.waiting_longest(10);
    BOOST_TEST_REQUIRE(rows.size() == 2u);
    BOOST_TEST(rows[0].instance.context_id == "o2");
    BOOST_TEST(rows[0].waiting == 1u);
    BOOST_TEST((rows[0].oldest_waiting_since == start));
    BOOST_TEST(rows[1].instance.context_id == "o1");
    BOOST_TEST(rows[1].waiting == 3u);
    BOOST_TEST(b.store.waiting_longest(1).size() == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expired_instances_come_in_pages, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    for (int i = 0; i < 5; ++i) {
        expect_outcome(h.deliver("OrderShipped", "s" + std::to_string(i), "o" + std::to_string(i)), outcome::buffered);
        if (i % 2 == 0) b.clock.advance(std::chrono::seconds(1));  // two pairs share a retention instant
    }
    b.clock.advance(std::chrono::hours(25));
    std::vector<std::string> seen;
    si::scan_position after;
    for (int page = 0; page < 4; ++page) {
        const auto rows = b.store.expired_instances(b.clock.now(), 2, after);
        BOOST_TEST(rows.size() <= 2u);
        if (rows.empty()) break;
        for (const auto& row : rows) seen.push_back(row.context_id);
        after = si::position_after(rows.back());
    }
    BOOST_TEST(seen == (conf::strings{"o0", "o1", "o2", "o3", "o4"}), boost::test_tools::per_element());
    const auto expiring = b.store.expiring_instances(b.clock.now() - std::chrono::hours(2), 0.5, 10, si::scan_position{});
    BOOST_TEST(expiring.size() == 5u);
    BOOST_TEST(b.store.expiring_instances(b.clock.now() - std::chrono::hours(2), 0.5, 10, si::position_after(expiring[2])).size() == 2u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(requests_made_after_the_job_read_them_stay_pending_for_the_next_run, Backend, backends) {
    // A message request does not wait for the instance lock. While the job replays v1 (it read
    // v1 CONSUME and p1 EXPIRE), the operator asks for v1 again later, changes p1 to CONSUME and
    // asks for e1: the job clears only the requests it read.
    Backend b;
    std::map<std::string, si::message_id> ids;
    bool requested = false;
    harness<Backend> h(b, [&](const conf::message&, const auto& ctx) {
        if (ctx.idempotence_id != "v1" || std::exchange(requested, true)) return;
        b.clock.advance(std::chrono::seconds(1));
        BOOST_TEST(seqinbox::accepted(b.store.request_message_action(ids["v1"], si::message_action::consume, b.clock.now())));  // newer
        BOOST_TEST(seqinbox::accepted(b.store.request_message_action(ids["p1"], si::message_action::consume, b.clock.now())));  // replaced
        BOOST_TEST(seqinbox::accepted(b.store.request_message_action(ids["e1"], si::message_action::expire, b.clock.now())));   // new
    });
    conf::buffer_three(h);
    expect_outcome(h.deliver("OrderExpedited", "e1", "o1"), outcome::buffered);
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v1"}, {"OrderPrepared", "p1"}, {"OrderExpedited", "e1"}})
        ids[id] = conf::message_id_of(b, type, id);
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(ids["v1"], si::message_action::consume, b.clock.now())));
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(ids["p1"], si::message_action::expire, b.clock.now())));

    BOOST_TEST(h.inbox->run_pending_actions(10, 1) == 2u);  // one page: what it read
    expect_calls(h.log, {"OrderValidated/v1 (replayed)", "OrderShipped/s1 (replayed)"});  // p1 expired as read
    expect_rows(b, "OrderPrepared", "p1", {"PROCESSED"});
    BOOST_TEST(conf::pending_message_requests(b, "o1") == (conf::strings{"v1 CONSUME", "p1 CONSUME", "e1 EXPIRE"}),
               boost::test_tools::per_element());

    BOOST_TEST(h.inbox->run_pending_actions(10, 1) == 1u);  // e1 expired; v1 and p1 are no longer WAITING: not run
    expect_calls(h.log, {"OrderValidated/v1 (replayed)", "OrderShipped/s1 (replayed)"});
    expect_rows(b, "OrderExpedited", "e1", {"PROCESSED"});
    BOOST_TEST(h.inbox->run_pending_actions() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(clearing_removes_exactly_the_requests_read, Backend, backends) {
    // The store's side, read without the instance lock so that the instance's request can be
    // replaced too: a request replaced after the read (another action or a later time) or new
    // since stays pending; one read and unchanged is cleared.
    Backend b;
    harness<Backend> h(b);
    conf::buffer_three(h);
    const auto instance = conf::instance_id_of(b, "o1");
    auto id = [&](const std::string& idempotence_id) {
        for (const char* type : {"OrderValidated", "OrderPrepared", "OrderShipped"})
            if (!b.messages_with_key({type, idempotence_id}).empty()) return conf::message_id_of(b, type, idempotence_id);
        throw std::logic_error("no message " + idempotence_id);
    };
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(instance, si::instance_action::close, b.clock.now())));
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(id("v1"), si::message_action::consume, b.clock.now())));
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(id("p1"), si::message_action::expire, b.clock.now())));

    auto tx = b.store.begin();
    const si::pending_actions read = tx.pending_actions(instance);
    b.clock.advance(std::chrono::seconds(1));
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(instance, si::instance_action::close, b.clock.now())));  // later
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(id("p1"), si::message_action::consume, b.clock.now())));  // replaced
    BOOST_TEST(seqinbox::accepted(b.store.request_message_action(id("s1"), si::message_action::expire, b.clock.now())));   // new
    tx.clear_actions(instance, read);
    tx.commit();

    const auto view = b.store.view_instance(conf::order_sequence, "o1");
    BOOST_TEST_REQUIRE(view.has_value());
    BOOST_TEST_REQUIRE(view->actions.on_instance.has_value());
    BOOST_TEST((view->actions.on_instance->requested_at == b.clock.now()));  // the later CLOSE
    BOOST_TEST(conf::pending_message_requests(b, "o1") == (conf::strings{"p1 CONSUME", "s1 EXPIRE"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- operator actions and batches ----

BOOST_AUTO_TEST_SUITE(sequential_inbox_batches)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_rows;

// A message whose consume by an operator failed keeps its FAILED row; buffered again, it takes
// that row (and its id) back, so one by one it is released before a message that waited since.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_resent_failed_message_is_released_in_the_order_of_its_row, Backend, backends) {
    const std::vector<si::envelope> records{conf::rec("OrderPrepared", "p1", "o1"), conf::rec("OrderCreated", "c1", "o1")};
    std::vector<std::string> order[2];
    for (const bool batched : {false, true}) {
        Backend b;
        conf::harness<Backend> h(b, conf::fail_once_each({"OrderPrepared/p1"}));
        h.deliver("OrderPrepared", "p1", "o1");
        BOOST_TEST_REQUIRE(seqinbox::accepted(b.store.request_instance_action(b.find_instance("OrderSequence", "o1")->id, si::instance_action::consume_all,
                                                           b.clock.now())));
        h.inbox->run_pending_actions();
        expect_rows(b, "OrderPrepared", "p1", {"FAILED"});
        h.deliver("OrderValidated", "v1", "o1");  // WAITING, a row after p1's
        if (batched) h.inbox->deliver_batch(records);
        else
            for (const auto& r : records) h.deliver(r);
        expect_rows(b, "OrderPrepared", "p1", {"PROCESSED"});
        order[batched] = h.log.order_of("o1");
    }
    BOOST_TEST(order[1] == order[0], boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
