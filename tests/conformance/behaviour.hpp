#pragma once
// The conformance suite: what every backend must do, written once (docs/guarantees.md).
//
// Include it from a Boost.Test module after defining `backends`, a type list (boost::mpl::list or
// std::tuple) of fixtures modeling seqinbox::conformance::backend (tests/conformance/backend.hpp).
// Every case builds its inboxes on a fresh fixture and checks both what the listeners saw and the
// committed state: message rows and states, claims, instances, error-sink records, acknowledgements.
// A store's further capabilities have their cases beside: operator actions (action_behaviour.hpp),
// housekeeping (housekeeping_behaviour.hpp), read views (view_behaviour.hpp), concurrent inboxes,
// housekeepers and writers (concurrency_behaviour.hpp); a backend includes those its store has.
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

// ---- release conditions ----

BOOST_AUTO_TEST_CASE_TEMPLATE(predecessor_is_buffered_then_released, Backend, backends) {
    Backend b;
    const std::string traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    std::string replayed_traceparent;
    harness<Backend> h(b, [&](const conf::message&, const auto& ctx) {
        if (ctx.replayed) replayed_traceparent = std::string(ctx.traceparent());
    });

    auto validated = si::testing::record("OrderValidated", "v1", "o1");
    validated.headers.push_back({std::string(si::traceparent_header), traceparent});
    expect_outcome(h.deliver(validated), outcome::buffered);
    expect_rows(b, "OrderValidated", "v1", {"WAITING"});
    const auto waiting = b.messages_with_key({"OrderValidated", "v1"});
    BOOST_TEST_REQUIRE(waiting.size() == 1u);
    BOOST_TEST_REQUIRE(waiting.front().payload.has_value());
    BOOST_TEST(waiting.front().payload->key == validated.key);
    BOOST_TEST(waiting.front().payload->value == validated.value);
    BOOST_TEST((waiting.front().payload->headers == validated.headers));
    BOOST_TEST(b.has_claim({"OrderValidated", "v1"}));
    BOOST_TEST(h.log.size() == 0u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN");

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 1);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    BOOST_TEST(replayed_traceparent == traceparent);
    BOOST_TEST(b.error_sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(buffered_records_replay_null_and_empty_keys_and_values_as_they_came, Backend, backends) {
    Backend b;
    auto decls = si::testing::order_declarations();
    for (auto& m : decls.sequences.front().messages)  // the context comes from a header: keys may be null
        m.context_id = [](const conf::message&, const si::envelope& e) -> std::optional<std::string> {
            if (auto order = e.find_header("order")) return std::string(*order);
            return std::nullopt;
        };
    std::map<std::string, si::envelope> replayed;
    harness<Backend> h(b, [&](const conf::message&, const auto& ctx) {
        if (ctx.replayed) replayed.insert_or_assign(ctx.idempotence_id, ctx.record);
    }, decls);
    auto buffered = [&](const std::string& type, const std::string& id, si::record_bytes key, si::record_bytes value) {
        auto e = si::testing::record(type, id, "");
        e.key = std::move(key);
        e.value = std::move(value);
        e.headers.push_back({"order", "o1"});
        expect_outcome(h.deliver(e), outcome::buffered);
        return e;
    };
    const std::vector<si::envelope> records = {buffered("OrderValidated", "v1", std::nullopt, std::nullopt),
                                               buffered("OrderPrepared", "p1", "", ""),
                                               buffered("OrderExpedited", "x1", std::nullopt, ""),
                                               buffered("OrderShipped", "s1", "", std::nullopt)};
    auto created = si::testing::record("OrderCreated", "c1", "");
    created.headers.push_back({"order", "o1"});
    expect_outcome(h.deliver(created), outcome::processed);

    for (const auto& e : records) {
        const std::string id(*e.find_header("idempotence-id"));
        BOOST_TEST_CONTEXT("record " << id) {
            BOOST_TEST_REQUIRE(replayed.count(id) == 1u);
            BOOST_TEST(replayed.at(id).key == e.key);
            BOOST_TEST(replayed.at(id).value == e.value);
        }
    }
    BOOST_TEST(b.error_sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(and_or_conditions, Backend, backends) {
    Backend b;
    harness<Backend> h(b);

    // o1: Validated alone does not release Shipped; Validated and Expedited do.
    expect_each(h, outcome::processed, "o1", {"OrderCreated/c1", "OrderValidated/v1"});
    expect_each(h, outcome::buffered, "o1", {"OrderShipped/s1"});
    expect_rows(b, "OrderShipped", "s1", {"WAITING"});
    conf::expect_releasing(h, "o1", "OrderExpedited/e1", 1);
    expect_rows(b, "OrderShipped", "s1", {"PROCESSED"});
    BOOST_TEST(conf::join(h.log.order_of("o1")) ==
               conf::join({"OrderCreated", "OrderValidated", "OrderExpedited", "OrderShipped"}));

    // o2: Prepared alone does not release Shipped; Prepared and Validated do.
    expect_each(h, outcome::processed, "o2", {"OrderCreated/c2"});
    expect_each(h, outcome::buffered, "o2", {"OrderShipped/s2"});
    conf::expect_releasing(h, "o2", "OrderPrepared/p2", 0);
    expect_rows(b, "OrderShipped", "s2", {"WAITING"});
    conf::expect_releasing(h, "o2", "OrderValidated/v2", 1);
    expect_rows(b, "OrderShipped", "s2", {"PROCESSED"});
    BOOST_TEST(conf::join(h.log.order_of("o2")) ==
               conf::join({"OrderCreated", "OrderPrepared", "OrderValidated", "OrderShipped"}));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(ten_buffered_messages_released_in_one_pass, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    const std::vector<std::pair<std::string, std::string>> arrivals = {
        {"OrderShipped", "s0"}, {"OrderValidated", "v0"}, {"OrderPrepared", "p0"}, {"OrderValidated", "v1"},
        {"OrderExpedited", "e0"}, {"OrderPrepared", "p1"}, {"OrderValidated", "v2"}, {"OrderExpedited", "e1"},
        {"OrderShipped", "s1"}, {"OrderValidated", "v3"}};
    for (const auto& [type, id] : arrivals) expect_outcome(h.deliver(type, id, "o1"), outcome::buffered);
    BOOST_TEST(b.messages().size() == 10u);
    BOOST_TEST(b.claim_count() == 10u);
    BOOST_TEST(h.log.size() == 0u);

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 10);

    const auto calls = h.log.calls();
    BOOST_TEST_REQUIRE(calls.size() == 11u);
    BOOST_TEST(calls.front().type == "OrderCreated");
    BOOST_TEST(!calls.front().replayed);
    for (std::size_t i = 1; i < calls.size(); ++i) BOOST_TEST(calls[i].replayed, calls[i].type << "/" << calls[i].idempotence_id);
    for (const std::string type : {"OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"}) {
        conf::strings arrived, released;
        for (const auto& [t, id] : arrivals)
            if (t == type) arrived.push_back(id);
        for (const auto& c : calls)
            if (c.type == type) released.push_back(c.idempotence_id);
        BOOST_TEST(conf::join(released) == conf::join(arrived), type);
    }
    BOOST_TEST(si::testing::order_violation(h.inbox->declared(), h.log.order_of("o1")) == "");
    for (const auto& row : b.messages()) BOOST_TEST(to_string(row.state) == "PROCESSED", row.type << "/" << row.idempotence_id);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(same_type_twice_in_one_instance, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    expect_each(h, outcome::processed, "o1", {"OrderCreated/c1", "OrderValidated/v1", "OrderValidated/v2"});
    expect_each(h, outcome::buffered, "o2", {"OrderValidated/v3", "OrderValidated/v4"});
    conf::expect_releasing(h, "o2", "OrderCreated/c2", 2);

    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1", "OrderValidated/v2", "OrderCreated/c2",
                         "OrderValidated/v3 (replayed)", "OrderValidated/v4 (replayed)"});
    for (const std::string id : {"v1", "v2", "v3", "v4"}) expect_rows(b, "OrderValidated", id, {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(instance_closes_when_every_type_is_processed, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderExpedited"));
    for (const std::string type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderShipped"}) {
        expect_outcome(h.deliver(type, type + "-1", "o1"), outcome::processed);
        BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN", "after " << type);
    }
    expect_outcome(h.deliver("OrderExpedited", "e1", "o1"), outcome::failed);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN", "a FAILED type does not close the instance");

    expect_outcome(h.deliver("OrderCreated", "c2", "o2"), outcome::processed);
    expect_outcome(h.deliver("OrderExpedited", "e1", "o1"), outcome::processed);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    BOOST_TEST(conf::instance_state_of(b, "o2") == "OPEN");

    // The last type handled is one no other type waits for.
    for (const std::string type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
        expect_outcome(h.deliver(type, type + "-3", "o3"), outcome::processed);
    BOOST_TEST(conf::instance_state_of(b, "o3") == "CLOSED", "closed by a type without dependents");
}

// ---- not sequenced and rejected deliveries ----

BOOST_AUTO_TEST_CASE_TEMPLATE(filtered_and_contextless_messages_bypass_the_inbox, Backend, backends) {
    Backend b;
    auto decls = si::testing::order_declarations();
    decls.sequences.at(0).messages.at(0).filter = [](const conf::message& value, const si::envelope&) {
        return value != "unsequenced";
    };
    harness<Backend> h(b, {}, std::move(decls));

    expect_outcome(h.deliver("OrderCreated", "c1", "o1", "unsequenced"), outcome::not_sequenced);
    expect_outcome(h.deliver("OrderValidated", "v1", ""), outcome::not_sequenced);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1"});
    for (const auto& c : h.log.calls()) BOOST_TEST(c.context_id == "");
    conf::expect_nothing_stored(b);
    BOOST_TEST(b.error_sink.size() == 0u);

    // Without a claim nothing makes a resend a duplicate: it is handled again.
    expect_outcome(h.deliver("OrderCreated", "c1", "o1", "unsequenced"), outcome::not_sequenced);
    BOOST_TEST(h.log.count("OrderCreated", "c1") == 2u);
    conf::expect_nothing_stored(b);

    // The filter drops only what it says.
    expect_outcome(h.deliver("OrderCreated", "c2", "o1"), outcome::processed);
    expect_rows(b, "OrderCreated", "c2", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(bad_messages_are_rejected_to_the_error_sink, Backend, backends) {
    Backend b;
    harness<Backend> h(b, {}, conf::with_check_subtypes());

    const auto unknown = si::testing::record("OrderCancelled", "x1", "o1");
    expect_outcome(h.deliver(unknown), outcome::rejected);
    const auto unknown_failure = conf::sink_record(b, "x1");
    BOOST_TEST(conf::contains(unknown_failure.reason, "OrderCancelled"), "reason: " << unknown_failure.reason);
    BOOST_TEST(unknown_failure.original.value == unknown.value);
    conf::expect_nothing_stored(b);

    expect_outcome(h.deliver("Check", "k2", "o1", "Z"), outcome::rejected);
    const auto subtype_failure = conf::sink_record(b, "k2");
    BOOST_TEST(conf::contains(subtype_failure.reason, "Z"), "reason: " << subtype_failure.reason);
    BOOST_TEST(conf::contains(subtype_failure.reason, "Check"), "reason: " << subtype_failure.reason);
    conf::expect_nothing_stored(b);

    auto undecodable = si::testing::record("OrderCreated", "c9", "o1");
    std::erase_if(undecodable.headers, [](const si::header& hd) { return hd.name == "idempotence-id"; });
    expect_outcome(h.deliver(undecodable), outcome::rejected);
    const auto undecodable_failure = conf::sink_record(b, "");
    BOOST_TEST(conf::contains(undecodable_failure.reason, "idempotence-id"), "reason: " << undecodable_failure.reason);
    conf::expect_nothing_stored(b);
    BOOST_TEST(h.log.size() == 0u);
    BOOST_TEST(b.error_sink.size() == 3u);

    // The declared subtypes are sequenced under their qualified type.
    expect_outcome(h.deliver("Check", "k3", "o1", "Y"), outcome::buffered);
    const auto x = h.deliver("Check", "k4", "o1", "X");
    expect_outcome(x, outcome::processed);
    BOOST_TEST(x.qualified_type == "Check.X");
    BOOST_TEST(x.released == 1u);
    expect_calls(h.log, {"Check.X/k4", "Check.Y/k3 (replayed)"});
    expect_rows(b, "Check.Y", "k3", {"PROCESSED"});
    BOOST_TEST(conf::instance_state_of(b, "o1", "CheckSequence") == "CLOSED");
}

/// Keys with quotes, backslashes and SQL text are stored and matched exactly; keys a store cannot
/// keep as text (NUL, invalid UTF-8, over max_key_bytes) are rejected with the reason, nothing stored.
BOOST_AUTO_TEST_CASE_TEMPLATE(keys_are_stored_exactly_or_rejected, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    const std::string tricky = "o'1\\\"; DROP TABLE sequence_instance; --\xC3\xA9";
    const std::string longest(si::max_key_bytes, 'k');
    expect_outcome(h.deliver("OrderCreated", tricky, tricky), outcome::processed);
    expect_outcome(h.deliver("OrderCreated", tricky, tricky), outcome::duplicate);
    expect_outcome(h.deliver("OrderValidated", longest, tricky), outcome::processed);
    expect_outcome(h.deliver("OrderValidated", longest, tricky), outcome::duplicate);
    expect_rows(b, "OrderCreated", tricky, {"PROCESSED"});
    expect_rows(b, "OrderValidated", longest, {"PROCESSED"});
    BOOST_TEST(conf::instance_state_of(b, tricky) == "OPEN");

    const std::string nul("c\0d", 3), invalid = "c\xFF", surrogate = "c\xED\xA0\x80", too_long = longest + "k";
    const std::pair<std::string, std::string> bad_keys[] = {
        {nul, "NUL byte"}, {invalid, "not valid UTF-8"}, {surrogate, "not valid UTF-8"}, {too_long, "1025 bytes"}};
    for (const auto& [key, why] : bad_keys) {
        const auto before = b.error_sink.size();
        expect_outcome(h.deliver("OrderPrepared", key, "o1"), outcome::rejected);
        expect_outcome(h.deliver("OrderPrepared", "p1", key), outcome::rejected);
        BOOST_TEST_REQUIRE(b.error_sink.size() == before + 2);
        BOOST_TEST(conf::contains(b.error_sink.records()[before].reason, "idempotence id"), b.error_sink.records()[before].reason);
        BOOST_TEST(conf::contains(b.error_sink.records()[before + 1].reason, "context id"), b.error_sink.records()[before + 1].reason);
        BOOST_TEST(conf::contains(b.error_sink.records()[before].reason, why), b.error_sink.records()[before].reason);
    }
    auto bad_header = si::testing::record("OrderPrepared", "p2", "o1");
    bad_header.headers.push_back({invalid, "x"});
    expect_outcome(h.deliver(bad_header), outcome::rejected);
    BOOST_TEST(conf::contains(b.error_sink.records().back().reason, "header name"), b.error_sink.records().back().reason);
    BOOST_TEST(b.messages().size() == 2u);
    BOOST_TEST(b.instances().size() == 1u);
    expect_calls(h.log, {"OrderCreated/" + tricky, "OrderValidated/" + longest});
}

// ---- failures and retries ----

BOOST_AUTO_TEST_CASE_TEMPLATE(direct_failure_is_retried_on_the_same_row, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderCreated"));
    const si::claim_key key{"OrderCreated", "c1"};

    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::failed);
    expect_rows(b, "OrderCreated", "c1", {"FAILED"});
    const auto failed_row = conf::row_id(b, "OrderCreated", "c1");
    BOOST_TEST(!b.has_claim(key));
    conf::expect_listener_failure_in_sink(b, "OrderCreated", "c1", "o1");
    BOOST_TEST(h.log.size() == 0u);

    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::processed);
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
    BOOST_TEST(conf::row_id(b, "OrderCreated", "c1") == failed_row);
    BOOST_TEST(b.has_claim(key));
    expect_calls(h.log, {"OrderCreated/c1"});
    BOOST_TEST(b.error_sink.size() == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(failed_release_stays_retryable, Backend, backends) {
    Backend b;
    harness<Backend> h(b, fail_first("OrderValidated", 1, true));
    const si::claim_key key{"OrderValidated", "v1"};

    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    BOOST_TEST(b.has_claim(key));
    const auto created = h.deliver("OrderCreated", "c1", "o1");
    expect_outcome(created, outcome::processed);
    BOOST_TEST(created.released == 0u);
    BOOST_TEST(created.release_failures == 1u);
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
    expect_rows(b, "OrderValidated", "v1", {"FAILED"});
    const auto failed_row = conf::row_id(b, "OrderValidated", "v1");
    BOOST_TEST(!b.has_claim(key));
    conf::expect_listener_failure_in_sink(b, "OrderValidated", "v1", "o1");
    expect_calls(h.log, {"OrderCreated/c1"});

    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::processed);
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    BOOST_TEST(conf::row_id(b, "OrderValidated", "v1") == failed_row);
    BOOST_TEST(b.has_claim(key));
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1"});
    BOOST_TEST(b.error_sink.size() == 1u);
}

// ---- duplicates ----

BOOST_AUTO_TEST_CASE_TEMPLATE(duplicate_of_a_waiting_message_is_skipped, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    expect_each(h, outcome::buffered, "o1", {"OrderValidated/v1"});
    expect_each(h, outcome::duplicate, "o1", {"OrderValidated/v1"});
    expect_rows(b, "OrderValidated", "v1", {"WAITING"});
    BOOST_TEST(h.log.size() == 0u);

    conf::expect_releasing(h, "o1", "OrderCreated/c1", 1);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(duplicate_of_a_processed_message_is_skipped, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    expect_each(h, outcome::buffered, "o1", {"OrderValidated/v1"});
    expect_each(h, outcome::processed, "o1", {"OrderCreated/c1"});
    expect_each(h, outcome::duplicate, "o1", {"OrderCreated/c1", "OrderValidated/v1", "OrderCreated/c1", "OrderValidated/v1"});
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)"});
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    BOOST_TEST(b.error_sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(historical_duplicate_rows_without_claim_are_skipped, Backend, backends) {
    Backend b;
    conf::insert_historical_rows(b, "o1", "OrderCreated", "c1", si::message_state::processed, 2);
    BOOST_TEST(b.claim_count() == 0u);
    harness<Backend> h(b);

    expect_each(h, outcome::duplicate, "o1", {"OrderCreated/c1", "OrderCreated/c1"});
    BOOST_TEST(h.log.size() == 0u);
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED", "PROCESSED"});
    BOOST_TEST(b.error_sink.size() == 0u);

    // The historical PROCESSED rows still count for the release of successors.
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::processed);
    expect_calls(h.log, {"OrderValidated/v1"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_redelivery_heals_what_a_crash_left_of_a_release_pass, Backend, backends) {
    // A server crash kept the state step of a release pass and lost its claim transaction: the
    // message is PROCESSED without a claim, its successor WAITING with its condition met.
    Backend b;
    b.store.store_message(conf::order_row(b, "o1", "OrderCreated", "c1", si::message_state::processed));
    auto validated = conf::order_row(b, "o1", "OrderValidated", "v1", si::message_state::waiting);
    validated.payload = si::testing::record("OrderValidated", "v1", "o1");
    b.store.store_message(validated);
    harness<Backend> h(b);

    const auto result = h.deliver("OrderCreated", "c1", "o1");
    expect_outcome(result, outcome::duplicate);
    BOOST_TEST(result.released == 1u);
    expect_calls(h.log, {"OrderValidated/v1 (replayed)"});
    BOOST_TEST(b.has_claim({"OrderCreated", "c1"}));
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_instance_does_not_close_before_its_ready_waiting_messages_are_released, Backend, backends) {
    // A release pass died with its connection after its message's state step committed: v2 is
    // still WAITING although its predecessor is PROCESSED. The last type's delivery closes the
    // instance, and every condition holds then: v2 is released first.
    Backend b;
    for (const char* type_id : {"OrderCreated/c1", "OrderValidated/v1", "OrderPrepared/p1", "OrderExpedited/x1"}) {
        const std::string text = type_id;
        const auto slash = text.find('/');
        b.store.store_message(conf::order_row(b, "o1", text.substr(0, slash), text.substr(slash + 1), si::message_state::processed));
    }
    auto stranded = conf::order_row(b, "o1", "OrderValidated", "v2", si::message_state::waiting);
    stranded.payload = si::testing::record("OrderValidated", "v2", "o1");
    b.store.store_message(stranded);
    harness<Backend> h(b);

    conf::expect_releasing(h, "o1", "OrderShipped/s1", 1);
    expect_calls(h.log, {"OrderShipped/s1", "OrderValidated/v2 (replayed)"});
    expect_rows(b, "OrderValidated", "v2", {"PROCESSED"});
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
}

// ---- transaction propagation of the listener ----

BOOST_AUTO_TEST_CASE_TEMPLATE(not_supported_listener_gets_no_transaction, Backend, backends) {
    Backend b;
    conf::business_trace trace;
    harness<Backend> h(b, conf::business_writer(b, trace));
    conf::buffered_then_direct(h);
    BOOST_TEST(trace.transaction_of.size() == 3u);
    for (const auto& [name, tx] : trace.transaction_of) BOOST_TEST(tx == 0u, name);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(required_commits_listener_writes_with_inbox_state, Backend, backends) {
    Backend b;
    conf::business_trace trace;
    harness<Backend, si::claim::insert_first, si::propagation::required> h(b, conf::business_writer(b, trace));
    conf::buffered_then_direct(h);

    for (const std::string name : {"OrderCreated/c1", "OrderValidated/v1", "OrderPrepared/p1"}) {
        BOOST_TEST(conf::business(b, name) == "o1", name);
        BOOST_TEST(trace.transaction_of[name] != 0u, name);
    }
    BOOST_TEST(trace.transaction_of["OrderCreated/c1"] == trace.transaction_of["OrderValidated/v1"],
               "a release joins the claim transaction of the releasing delivery");
    BOOST_TEST(trace.transaction_of["OrderCreated/c1"] != trace.transaction_of["OrderPrepared/p1"]);
    BOOST_TEST(trace.visible_too_early.empty(), conf::join(trace.visible_too_early));
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
    expect_rows(b, "OrderPrepared", "p1", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(required_rolls_back_writes_of_a_failing_listener, Backend, backends) {
    Backend b;
    conf::business_trace trace;
    harness<Backend, si::claim::insert_first, si::propagation::required> h(
        b, conf::chain(conf::business_writer(b, trace), fail_first("OrderPrepared"), fail_first("OrderValidated", 1, true)));

    // Direct path: the write dies with T1, FAILED is recorded anyway; a resend retries.
    expect_outcome(h.deliver("OrderCreated", "c1", "o1"), outcome::processed);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::failed);
    BOOST_TEST(conf::business(b, "OrderPrepared/p1") == "<none>");
    expect_rows(b, "OrderPrepared", "p1", {"FAILED"});
    BOOST_TEST(!b.has_claim({"OrderPrepared", "p1"}));
    conf::expect_listener_failure_in_sink(b, "OrderPrepared", "p1", "o1");
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::processed);
    BOOST_TEST(conf::business(b, "OrderPrepared/p1") == "o1");
    expect_rows(b, "OrderPrepared", "p1", {"PROCESSED"});

    // Release path: only the failing replay's write is undone, the releasing delivery's stays.
    expect_outcome(h.deliver("OrderValidated", "v2", "o2"), outcome::buffered);
    const auto created = h.deliver("OrderCreated", "c2", "o2");
    expect_outcome(created, outcome::processed);
    BOOST_TEST(created.release_failures == 1u);
    BOOST_TEST(conf::business(b, "OrderCreated/c2") == "o2");
    BOOST_TEST(conf::business(b, "OrderValidated/v2") == "<none>");
    expect_rows(b, "OrderCreated", "c2", {"PROCESSED"});
    expect_rows(b, "OrderValidated", "v2", {"FAILED"});
    BOOST_TEST(!b.has_claim({"OrderValidated", "v2"}));
    conf::expect_listener_failure_in_sink(b, "OrderValidated", "v2", "o2");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(requires_new_gives_each_listener_call_its_own_transaction, Backend, backends) {
    Backend b;
    conf::business_trace trace;
    bool created_committed_before_release = false;
    auto observe = [&](const conf::message&, const auto& ctx) {
        if (ctx.replayed) created_committed_before_release = b.business_get("OrderCreated/c1").has_value();
    };
    harness<Backend, si::claim::insert_first, si::propagation::requires_new> h(
        b, conf::chain(conf::business_writer(b, trace), observe, fail_first("OrderExpedited")));
    conf::buffered_then_direct(h);

    std::set<std::uint64_t> transactions;
    for (const std::string name : {"OrderCreated/c1", "OrderValidated/v1", "OrderPrepared/p1"}) {
        BOOST_TEST(conf::business(b, name) == "o1", name);
        BOOST_TEST(trace.transaction_of[name] != 0u, name);
        transactions.insert(trace.transaction_of[name]);
    }
    BOOST_TEST(transactions.size() == 3u, "one transaction per listener call");
    BOOST_TEST(created_committed_before_release);
    BOOST_TEST(trace.visible_too_early.empty(), conf::join(trace.visible_too_early));

    expect_outcome(h.deliver("OrderExpedited", "e1", "o1"), outcome::failed);
    BOOST_TEST(conf::business(b, "OrderExpedited/e1") == "<none>");
    expect_rows(b, "OrderExpedited", "e1", {"FAILED"});
}

// ---- acknowledgement ----

BOOST_AUTO_TEST_CASE_TEMPLATE(acknowledgement_follows_the_durable_decision, Backend, backends) {
    Backend b;
    conf::strings at_listener;  // acknowledged deliveries while each listener ran
    auto observe = [&](const conf::message&, const auto& ctx) {
        at_listener.push_back(ctx.idempotence_id + " sees " + conf::join(conf::acknowledged_ids(b)) + " in flight " +
                              std::to_string(b.source.in_flight()));
    };
    harness<Backend> h(b, conf::chain(observe, fail_first("OrderPrepared", 2)));

    b.source.push(si::testing::record("OrderValidated", "v1", "o1"));
    b.source.push(si::testing::record("OrderCreated", "c1", "o1"));
    const auto buffered = h.inbox->poll_once();
    BOOST_TEST_REQUIRE(buffered.has_value());
    expect_outcome(*buffered, outcome::buffered);
    BOOST_TEST(conf::join(conf::acknowledged_ids(b)) == "[v1]");
    expect_rows(b, "OrderValidated", "v1", {"WAITING"});
    const auto created = h.inbox->poll_once();
    BOOST_TEST_REQUIRE(created.has_value());
    BOOST_TEST(created->released == 1u);
    BOOST_TEST(conf::join(conf::acknowledged_ids(b)) == "[v1, c1]");
    BOOST_TEST(conf::join(at_listener) == "[c1 sees [v1] in flight 1, v1 sees [v1] in flight 1]");

    // The error sink fails while a listener failure is reported: no acknowledgement, no loss.
    b.source.push(si::testing::record("OrderPrepared", "p1", "o1"));
    b.error_sink.fail_next(1);
    BOOST_CHECK_THROW(h.inbox->poll_once(), std::exception);
    BOOST_TEST(conf::join(conf::acknowledged_ids(b)) == "[v1, c1]");
    BOOST_TEST(b.source.in_flight() == 1u);
    BOOST_TEST(b.error_sink.size() == 0u);
    BOOST_TEST(!b.has_claim({"OrderPrepared", "p1"}));
    BOOST_TEST(b.source.redeliver_unacknowledged() == 1u);
    const auto retried = h.inbox->poll_once();
    BOOST_TEST_REQUIRE(retried.has_value());
    expect_outcome(*retried, outcome::failed);
    BOOST_TEST(conf::join(conf::acknowledged_ids(b)) == "[v1, c1, p1]");
    conf::expect_listener_failure_in_sink(b, "OrderPrepared", "p1", "o1");
    expect_rows(b, "OrderPrepared", "p1", {"FAILED"});
    b.source.push(si::testing::record("OrderPrepared", "p1", "o1"));
    expect_outcome(h.inbox->poll_once().value(), outcome::processed);
    expect_rows(b, "OrderPrepared", "p1", {"PROCESSED"});

    // Same for a rejected delivery.
    b.source.push(si::testing::record("OrderCancelled", "x1", "o1"));
    b.error_sink.fail_next(1);
    BOOST_CHECK_THROW(h.inbox->poll_once(), std::exception);
    BOOST_TEST(b.source.in_flight() == 1u);
    BOOST_TEST(b.source.redeliver_unacknowledged() == 1u);
    expect_outcome(h.inbox->poll_once().value(), outcome::rejected);
    BOOST_TEST(conf::sink_record(b, "x1").reason != "");
    BOOST_TEST(conf::join(conf::acknowledged_ids(b)) == "[v1, c1, p1, p1, x1]");
    BOOST_TEST(b.source.in_flight() == 0u);
    BOOST_TEST(b.source.pending() == 0u);
}

// ---- recording mode ----

BOOST_AUTO_TEST_CASE_TEMPLATE(recording_mode_records_until_its_start_instant_then_sequences, Backend, backends) {
    Backend b;
    auto decls = si::testing::order_declarations();
    const si::timestamp start = b.clock.now() + std::chrono::minutes(10);
    decls.sequences[0].recording_until = start;
    harness<Backend> h(b, {}, std::move(decls));

    // Before the start instant: successors whose predecessors were never seen run at once.
    expect_outcome(h.deliver("OrderShipped", "s1", "o1"), outcome::processed);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::processed);
    expect_rows(b, "OrderShipped", "s1", {"PROCESSED"});
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN");
    for (const auto& [type, id] : {std::pair{"OrderCreated", "c1"}, {"OrderPrepared", "p1"}, {"OrderExpedited", "e1"}})
        expect_outcome(h.deliver(type, id, "o1"), outcome::processed);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");  // complete: every type recorded
    expect_outcome(h.deliver("OrderShipped", "s1", "o1"), outcome::duplicate);

    // From the start instant on, the same inbox sequences: no restart.
    b.clock.set(start);
    expect_outcome(h.deliver("OrderValidated", "v2", "o2"), outcome::buffered);
    conf::expect_releasing(h, "o2", "OrderCreated/c2", 1);
    expect_calls(h.log, {"OrderShipped/s1", "OrderValidated/v1", "OrderCreated/c1", "OrderPrepared/p1", "OrderExpedited/e1",
                         "OrderCreated/c2", "OrderValidated/v2 (replayed)"});
    BOOST_TEST(b.error_sink.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
