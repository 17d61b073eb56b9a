#pragma once
// The conformance suite: what every backend must do, written once (docs/guarantees.md).
//
// Include it from a Boost.Test module after defining `backends`, a type list (boost::mpl::list or
// std::tuple) of fixtures modeling seqinbox::conformance::backend (tests/conformance/backend.hpp).
// Every case builds its inboxes on a fresh fixture and checks both what the listeners saw and the
// committed state: message rows and states, claims, instances, error-sink records, acknowledgements.
// The cases of concurrent inboxes, housekeepers and writers are in concurrency_behaviour.hpp
// (included at the end), which the topology tests run on their own as well.
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

// ---- housekeeping ----

BOOST_AUTO_TEST_CASE_TEMPLATE(housekeeping_removes_closed_instances_with_their_messages_and_claims, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    conf::complete_order(h, "o1");
    expect_outcome(h.deliver("OrderCreated", "c2", "o2"), outcome::processed);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");

    b.clock.advance(std::chrono::hours(24));  // the deduplication window (the retention) has passed
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, {}, b.clock);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.closed_removed == 1u);
    BOOST_TEST(report.complete);
    BOOST_TEST(report.skipped.empty());
    BOOST_TEST(conf::instance_state_of(b, "o1") == "absent");
    BOOST_TEST(b.messages_with_key({"OrderCreated", "OrderCreated@o1"}).empty());
    BOOST_TEST(!b.has_claim({"OrderCreated", "OrderCreated@o1"}));
    BOOST_TEST(conf::instance_state_of(b, "o2") == "OPEN");
    BOOST_TEST(b.error_sink.size() == 0u);

    // The retention boundary: a duplicate arriving after the removal is processed as new.
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::processed);
    BOOST_TEST(h.log.count("OrderCreated", "OrderCreated@o1") == 2u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_closed_instance_is_kept_for_its_deduplication_window_counted_from_closing, Backend, backends) {
    // Default window: the retention (24 h), from closing, not from creation. Until it ends, late
    // duplicates are recognised (a late successor does not open a new instance that waits forever).
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::processed);
    b.clock.advance(2h);
    conf::complete_order_after_created(h, "o1");
    BOOST_TEST_REQUIRE(conf::instance_state_of(b, "o1") == "CLOSED");
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, {}, b.clock);

    b.clock.advance(24h - 1s);  // 26 h after creation, 1 s before the window ends
    BOOST_TEST(housekeeper.run_once().closed_removed == 0u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::duplicate);
    expect_outcome(h.deliver("OrderShipped", "OrderShipped@o1", "o1"), outcome::duplicate);
    BOOST_TEST(b.instances().size() == 1u);

    b.clock.advance(1s);
    BOOST_TEST(housekeeper.run_once().closed_removed == 1u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "absent");
    // After the window a duplicate is new.
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::processed);
    BOOST_TEST(h.log.count("OrderCreated", "OrderCreated@o1") == 2u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(each_sequence_keeps_its_closed_instances_for_its_declared_window, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    auto decls = si::testing::order_declarations();
    decls.sequences[0].deduplication_window = 1h;
    harness<Backend> h(b, {}, decls);
    conf::complete_order(h, "o1");
    si::housekeeping_options options;
    options.deduplication_windows = si::deduplication_windows_of(decls);
    // Another sequence's window (a name that needs quoting) applies to its instances only.
    options.deduplication_windows.insert(options.deduplication_windows.begin(), {"Other, 'sequence'", 0s});
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, options, b.clock);

    b.clock.advance(1h - 1s);
    BOOST_TEST(housekeeper.run_once().closed_removed == 0u);
    expect_outcome(h.deliver("OrderValidated", "OrderValidated@o1", "o1"), outcome::duplicate);
    b.clock.advance(1s);
    BOOST_TEST(housekeeper.run_once().closed_removed == 1u);

    // A zero window: removed at the first run after closing.
    conf::complete_order(h, "o2");
    options.deduplication_windows = {{conf::order_sequence, 0s}};
    conf::housekeeper_of<Backend> eager(b.store, b.error_sink, options, b.clock);
    BOOST_TEST(eager.run_once().closed_removed == 1u);
    BOOST_TEST(b.instances().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_operator_close_starts_the_deduplication_window, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    b.clock.advance(3h);
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(conf::instance_id_of(b, "o1"), si::instance_action::close, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, {}, b.clock);

    b.clock.advance(24h - 1s);
    BOOST_TEST(housekeeper.run_once().closed_removed == 0u);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::duplicate);
    b.clock.advance(1s);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.closed_removed == 1u);
    BOOST_TEST(report.forwarded == 1u);  // the WAITING message the close left behind
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_instance_closed_after_being_marked_expired_is_kept_for_its_window, Backend, backends) {
    // The removal job takes OPEN instances only: closing ends the expiry, and the window applies.
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    si::housekeeping_options options;
    options.removal_delay = 1h;
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, options, b.clock);
    b.clock.advance(24h + 1s);
    BOOST_TEST(housekeeper.run_once().marked == 1u);
    conf::complete_order(h, "o1");
    BOOST_TEST_REQUIRE(conf::instance_state_of(b, "o1") == "CLOSED");

    b.clock.advance(2h);  // past remove_after, within the window
    BOOST_TEST(housekeeper.run_once().expired_removed == 0u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    b.clock.advance(22h);
    BOOST_TEST(housekeeper.run_once().closed_removed == 1u);
    BOOST_TEST(b.error_sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expired_instances_are_marked_then_removed_after_their_waiting_messages_are_forwarded, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    conf::buffer_three(h);
    expect_outcome(h.deliver("OrderCreated", "c2", "o2"), outcome::processed);
    si::housekeeping_options options;
    options.removal_delay = std::chrono::hours(1);
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, options, b.clock);
    BOOST_TEST(housekeeper.run_once().marked == 0u);  // within retention (24 h)

    b.clock.advance(std::chrono::hours(24) + std::chrono::seconds(1));
    auto report = housekeeper.run_once();
    BOOST_TEST(report.marked == 2u);
    BOOST_TEST(report.expired_removed == 0u);
    const auto o1 = b.find_instance(conf::order_sequence, "o1");
    BOOST_TEST_REQUIRE(o1.has_value());
    BOOST_TEST_REQUIRE(o1->remove_after.has_value());
    BOOST_TEST((*o1->remove_after == o1->retain_until + std::chrono::hours(1)));
    BOOST_TEST(housekeeper.run_once().marked == 0u);  // marked once

    b.clock.advance(std::chrono::hours(1));
    report = housekeeper.run_once();
    BOOST_TEST(report.expired_removed == 2u);
    BOOST_TEST(report.forwarded == 3u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "absent");
    BOOST_TEST(conf::instance_state_of(b, "o2") == "absent");
    BOOST_TEST_REQUIRE(b.error_sink.size() == 3u);
    conf::strings forwarded;
    for (const auto& f : b.error_sink.records()) {
        forwarded.push_back(f.qualified_type + "/" + f.idempotence_id);
        BOOST_TEST(f.reason.find("removed by housekeeping") != std::string::npos, f.reason);
        BOOST_TEST(f.context_id == "o1");
        BOOST_TEST(f.original.value == si::testing::record(f.qualified_type, f.idempotence_id, "o1").value);
    }
    std::ranges::sort(forwarded);
    BOOST_TEST(forwarded == (conf::strings{"OrderPrepared/p1", "OrderShipped/s1", "OrderValidated/v1"}), boost::test_tools::per_element());
    BOOST_TEST(h.log.size() == 1u);  // nothing was replayed
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_state_change_of_a_message_removed_meanwhile_changes_nothing, Backend, backends) {
    // A state step runs beside its claim transaction; when that one lost its connection, the
    // instance lock is gone and housekeeping may remove the instance before the step writes.
    // Like an UPDATE of a deleted row, the step then changes nothing and does not fail.
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    const auto id = conf::message_id_of(b, "OrderValidated", "v1");
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(conf::instance_id_of(b, "o1"), si::instance_action::close, b.clock.now())));
    BOOST_TEST(h.inbox->run_pending_actions() == 1u);
    auto step = b.store.begin();
    si::housekeeping_options no_window;
    no_window.deduplication_windows = {{conf::order_sequence, std::chrono::seconds(0)}};
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, no_window, b.clock);
    BOOST_TEST(housekeeper.run_once().closed_removed == 1u);
    step.update_message_state(id, si::message_state::processed, b.clock.now());
    step.commit();
    BOOST_TEST(b.messages_with_key({"OrderValidated", "v1"}).empty());
    BOOST_TEST(b.error_sink.size() == 1u);  // forwarded by the removal
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_failing_error_sink_keeps_the_whole_removal_batch, Backend, backends) {
    // The WAITING messages of a batch go to the sink before its one transaction commits: the
    // instance whose message was published first stays too (a later run publishes it again).
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    for (const char* ctx : {"o1", "o2", "o3"}) expect_outcome(h.deliver("OrderValidated", std::string("v-") + ctx, ctx), outcome::buffered);
    b.clock.advance(24h + 1s);
    conf::nth_publication_fails sink(2);
    si::basic_housekeeper<typename Backend::store_type, conf::nth_publication_fails, si::clock::manual_clock> failing(
        b.store, sink, conf::removing_at_once(), b.clock);
    BOOST_CHECK_THROW(failing.run_once(), std::runtime_error);
    BOOST_TEST(b.instances().size() == 3u);
    BOOST_TEST(b.messages().size() == 3u);
    for (const auto& instance : b.instances()) BOOST_TEST(instance.remove_after.has_value());  // marking committed apart

    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, conf::removing_at_once(), b.clock);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.expired_removed == 3u);
    BOOST_TEST(report.forwarded == 3u);
    BOOST_TEST(b.error_sink.size() == 3u);
    BOOST_TEST(b.instances().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(batches_pass_over_a_closed_instance_still_in_its_window, Backend, backends) {
    // The oldest instance (the smallest id) closes last: batches of one go on past it.
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "OrderValidated@o1", "o1"), outcome::buffered);
    for (const char* ctx : {"o2", "o3", "o4"}) conf::complete_order(h, ctx);
    b.clock.advance(24h + 1s);
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::processed);
    for (const char* type : {"OrderPrepared", "OrderExpedited", "OrderShipped"})  // OrderValidated was released
        expect_outcome(h.deliver(type, std::string(type) + "@o1", "o1"), outcome::processed);
    BOOST_TEST_REQUIRE(conf::instance_state_of(b, "o1") == "CLOSED");
    auto options = conf::removing_at_once();
    options.batch_size = 1;
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, options, b.clock);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.closed_removed == 3u);
    BOOST_TEST(conf::job_run(report, "closed_cleanup").batches == 4u);  // three of one, then none left
    BOOST_TEST(report.complete);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    BOOST_TEST(b.instances().size() == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(every_job_gets_its_share_of_a_run, Backend, backends) {
    // A long closed backlog no longer takes a run's whole time: marking and removal get theirs.
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    for (int i = 0; i < 40; ++i) conf::complete_order(h, "closed" + std::to_string(i));
    for (const char* ctx : {"e1", "e2", "e3"}) expect_outcome(h.deliver("OrderValidated", std::string("v-") + ctx, ctx), outcome::buffered);
    b.clock.advance(24h + 1s);
    auto options = conf::removing_at_once();
    options.batch_size = 1;
    options.max_duration = 60s;  // two seconds a batch: 30 batches in all
    si::basic_housekeeper<typename Backend::store_type, si::memory::error_sink, conf::ticking_clock> housekeeper(
        b.store, b.error_sink, options, conf::ticking_clock{b.clock});
    const auto report = housekeeper.run_once();
    BOOST_TEST(!report.complete);
    BOOST_TEST(!conf::job_run(report, "closed_cleanup").complete);
    BOOST_TEST(report.closed_removed > 0u);
    BOOST_TEST(report.closed_removed < 20u);  // about a third of the batches
    BOOST_TEST(report.marked == 3u);
    BOOST_TEST(report.expired_removed == 3u);
    BOOST_TEST(report.forwarded == 3u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_job_pauses_between_batches_at_its_pace, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    for (const char* ctx : {"o1", "o2", "o3", "o4"}) conf::complete_order(h, ctx);
    b.clock.advance(24h);
    si::housekeeping_options options;
    options.batch_size = 1;
    options.work_share = 0.25;  // pauses three times as long as each batch took
    conf::housekeeper_of<Backend> paced(b.store, b.error_sink, options, b.clock);
    auto report = paced.run_once();
    BOOST_TEST(report.closed_removed == 4u);
    const auto& run = conf::job_run(report, "closed_cleanup");
    BOOST_TEST(run.batches == 5u);
    BOOST_TEST(run.paused.count() > 0);
    BOOST_TEST((run.paused * 4 <= run.took * 3));  // three times the batches' time, within the job's

    for (const char* ctx : {"o5", "o6"}) conf::complete_order(h, ctx);
    b.clock.advance(24h);
    options.work_share = 1;
    conf::housekeeper_of<Backend> unpaced(b.store, b.error_sink, options, b.clock);
    report = unpaced.run_once();
    BOOST_TEST(report.closed_removed == 2u);
    BOOST_TEST(conf::job_run(report, "closed_cleanup").paused.count() == 0);

    options.work_share = 0;
    BOOST_CHECK_EXCEPTION(conf::housekeeper_of<Backend>(b.store, b.error_sink, options, b.clock), si::error,
                          [](const si::error& e) { return conf::contains(e.what(), "work_share must be in (0, 1], not 0"); });
}

// ---- read views ----

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

#include "conformance/concurrency_behaviour.hpp"
