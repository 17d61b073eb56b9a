#pragma once
// The conformance cases of concurrent work on one store (part of the suite of behaviour.hpp; a
// backend's test_conformance.cpp includes it after that header): inboxes on many threads, two
// housekeepers and the job locks, and two writers of one key (the takeover of a claim). The
// topology tests (tests/pgbouncer/) include it alone, with `backends` defined the same way, to run
// these cases through a pooler.
#include <boost/test/unit_test.hpp>

#include "conformance/harness.hpp"

BOOST_AUTO_TEST_SUITE(sequential_inbox)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_outcome;
using conf::expect_rows;
using conf::harness;
using si::outcome;

// ---- concurrency ----

BOOST_AUTO_TEST_CASE_TEMPLATE(listeners_of_one_context_never_overlap, Backend, backends) {
    using inbox_type = conf::inbox_of<Backend>;
    constexpr int threads = 8;
    constexpr int contexts = 50;
    Backend b;
    const auto decls = si::testing::order_declarations();
    conf::strings types, context_ids;
    for (const auto& msg : decls.sequences.at(0).messages) types.push_back(msg.qualified_type());
    for (int i = 0; i < contexts; ++i) context_ids.push_back("order-" + std::to_string(i));

    std::vector<si::envelope> deliveries;
    for (const auto& ctx : context_ids)
        for (const auto& type : types)
            for (int copy = 0; copy < 2; ++copy) deliveries.push_back(si::testing::record(type, type + "@" + ctx, ctx));
    std::shuffle(deliveries.begin(), deliveries.end(), std::mt19937(20240601));
    for (const auto& e : deliveries) b.source.push(e);

    conf::exclusivity_probe probe(context_ids);
    si::testing::call_log log;
    std::vector<std::unique_ptr<inbox_type>> inboxes;
    for (int i = 0; i < threads; ++i) {
        inboxes.push_back(conf::make_inbox<inbox_type>(b, decls));
        conf::listen(*inboxes.back(), log, conf::hook<inbox_type>([&probe](const conf::message&, const auto& ctx) {
                         probe.visit(ctx.context_id);
                     }));
    }
    std::mutex errors_mutex;
    conf::strings errors;
    std::vector<std::thread> workers;
    for (auto& inbox : inboxes)
        workers.emplace_back([&, in = inbox.get()] {
            try {
                while (in->poll_once()) {}
            } catch (const std::exception& e) {
                std::lock_guard lock(errors_mutex);
                errors.emplace_back(e.what());
            }
        });
    for (auto& w : workers) w.join();
    BOOST_TEST_MESSAGE("most listeners in parallel: " << probe.most_in_parallel());

    BOOST_TEST(errors.empty(), conf::join(errors));
    BOOST_TEST(probe.overlaps() == 0);
    BOOST_TEST(log.size() == context_ids.size() * types.size());
    for (const auto& ctx : context_ids) {
        for (const auto& type : types) BOOST_TEST(log.count(type, type + "@" + ctx) == 1u, type << "@" << ctx);
        BOOST_TEST(si::testing::order_violation(decls, log.order_of(ctx)) == "", ctx);
        BOOST_TEST(conf::instance_state_of(b, ctx) == "CLOSED", ctx);
    }
    BOOST_TEST(b.messages().size() == context_ids.size() * types.size());
    for (const auto& row : b.messages()) BOOST_TEST(to_string(row.state) == "PROCESSED", row.type << "/" << row.idempotence_id);
    BOOST_TEST(b.claim_count() == context_ids.size() * types.size());
    BOOST_TEST(b.source.acknowledged().size() == deliveries.size());
    BOOST_TEST(b.error_sink.size() == 0u);
}

// ---- housekeeping jobs, one runner each ----

BOOST_AUTO_TEST_CASE_TEMPLATE(one_runner_per_housekeeping_job_and_a_bounded_run_resumes, Backend, backends) {
    Backend b;
    harness<Backend> h(b);
    for (const char* ctx : {"o1", "o2", "o3"}) conf::complete_order(h, ctx);
    b.clock.advance(std::chrono::hours(24));  // past their deduplication window
    conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, {}, b.clock);
    {
        auto held = b.store.try_lock_job("seqinbox.closed_cleanup");  // another service instance runs it
        BOOST_TEST(static_cast<bool>(held));
        BOOST_TEST(!static_cast<bool>(b.store.try_lock_job("seqinbox.closed_cleanup")));
        const auto report = housekeeper.run_once();
        BOOST_TEST(report.skipped == conf::strings{"closed_cleanup"}, boost::test_tools::per_element());
        BOOST_TEST(report.closed_removed == 0u);
    }
    si::housekeeping_options bounded;
    bounded.batch_size = 1;
    bounded.max_duration = std::chrono::seconds(0);  // one batch per run
    conf::housekeeper_of<Backend> stepwise(b.store, b.error_sink, bounded, b.clock);
    for (std::size_t left : {2u, 1u}) {
        const auto report = stepwise.run_once();
        BOOST_TEST(report.closed_removed == 1u);
        BOOST_TEST(!report.complete);
        BOOST_TEST(b.instances().size() == left);
    }
    BOOST_TEST(stepwise.run_once().closed_removed == 1u);
    BOOST_TEST(b.instances().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(two_housekeepers_at_once_remove_everything_once, Backend, backends) {
    // Two service instances housekeeping the same store together: each job runs in one of them
    // at a time, every instance goes once, and every WAITING message reaches the sink once.
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    for (int i = 0; i < 12; ++i) conf::complete_order(h, "closed" + std::to_string(i));
    for (int i = 0; i < 12; ++i) {
        const auto ctx = "expired" + std::to_string(i);
        expect_outcome(h.deliver("OrderValidated", "v-" + ctx, ctx), outcome::buffered);
    }
    b.clock.advance(24h + 1s);
    auto options = conf::removing_at_once();
    options.batch_size = 2;
    std::array<si::housekeeping_report, 2> totals{};
    auto housekeep = [&](si::housekeeping_report& total) {
        conf::housekeeper_of<Backend> housekeeper(b.store, b.error_sink, options, b.clock);
        // Until a run of all three jobs finds nothing (the fixture's inspection is not for threads).
        for (int run = 0; run < 500; ++run) {
            const auto report = housekeeper.run_once();
            total.closed_removed += report.closed_removed;
            total.marked += report.marked;
            total.expired_removed += report.expired_removed;
            total.forwarded += report.forwarded;
            if (report.skipped.empty() && report.closed_removed + report.marked + report.expired_removed == 0) break;
        }
    };
    std::thread other(housekeep, std::ref(totals[1]));
    housekeep(totals[0]);
    other.join();
    BOOST_TEST(b.instances().empty());
    BOOST_TEST(b.messages().empty());
    BOOST_TEST(totals[0].closed_removed + totals[1].closed_removed == 12u);
    BOOST_TEST(totals[0].marked + totals[1].marked == 12u);
    BOOST_TEST(totals[0].expired_removed + totals[1].expired_removed == 12u);
    BOOST_TEST(totals[0].forwarded + totals[1].forwarded == 12u);
    BOOST_TEST(b.error_sink.size() == 12u);
}

// ---- the state step, serialised per key ----

BOOST_AUTO_TEST_CASE_TEMPLATE(store_message_keeps_one_row_per_key, Backend, backends) {
    using si::message_state;
    using si::stored_as;
    Backend b;
    auto store = [&](const std::string& id, message_state state) {
        return b.store.store_message(conf::order_row(b, "o1", "OrderCreated", id, state));
    };
    auto check = [&](const std::string& id, message_state state, stored_as expected, const conf::strings& states) {
        BOOST_TEST((store(id, state) == expected), id << " " << to_string(state));
        expect_rows(b, "OrderCreated", id, states);
    };
    check("new", message_state::processed, stored_as::inserted, {"PROCESSED"});
    check("new", message_state::processed, stored_as::left_existing, {"PROCESSED"});  // a takeover stored it first
    check("new", message_state::failed, stored_as::left_existing, {"PROCESSED"});
    check("retried", message_state::failed, stored_as::inserted, {"FAILED"});
    check("retried", message_state::processed, stored_as::updated, {"PROCESSED"});      // the retry takes the row
    check("buffered", message_state::waiting, stored_as::inserted, {"WAITING"});
    check("buffered", message_state::waiting, stored_as::left_existing, {"WAITING"});
    check("buffered", message_state::failed, stored_as::left_existing, {"WAITING"});
    check("buffered", message_state::processed, stored_as::updated, {"PROCESSED"});      // its listener ran

    // The FAILED row of a failed release waits again with the record of the new delivery.
    check("rebuffered", message_state::failed, stored_as::inserted, {"FAILED"});
    auto waiting = conf::order_row(b, "o1", "OrderCreated", "rebuffered", message_state::waiting);
    waiting.payload = si::testing::record("OrderCreated", "rebuffered", "o1");
    BOOST_TEST((b.store.store_message(waiting) == stored_as::updated));
    auto tx = b.store.begin();
    const auto instance = tx.lock_instance(waiting.instance).row.id;
    const std::string type = "OrderCreated";
    const auto rows = tx.waiting_messages(instance, std::span(&type, 1));
    tx.commit();
    BOOST_TEST_REQUIRE(rows.size() == 1u);
    BOOST_TEST_REQUIRE(rows[0].payload.has_value());
    BOOST_TEST((rows[0].payload->value == waiting.payload->value));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_step_beside_the_claim_transaction_is_seen_at_once_and_outlives_its_rollback, Backend, backends) {
    Backend b;
    const auto row = conf::order_row(b, "o1", "OrderCreated", "c1", si::message_state::processed);
    auto claim = b.store.begin();
    BOOST_TEST_REQUIRE(claim.claim({row.key(), row.instance, {}}).won);
    BOOST_TEST((b.store.store_message_beside(claim, row) == si::stored_as::inserted));
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});  // committed while the claim is open
    BOOST_TEST(claim.active());
    claim.rollback();
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
    auto redelivery = b.store.begin();
    BOOST_TEST_REQUIRE(redelivery.claim({row.key(), row.instance, {}}).won);  // the claim went with the rollback
    BOOST_TEST((b.store.store_message_beside(redelivery, row) == si::stored_as::left_existing));
    redelivery.commit();
}

BOOST_AUTO_TEST_CASE_TEMPLATE(store_message_waits_for_the_holder_of_the_key, Backend, backends) {
    // Two writers of one key: the second reads only after the first commits, so it keeps the
    // first's row instead of adding its own.
    Backend b;
    const auto row = conf::order_row(b, "o1", "OrderCreated", "c1", si::message_state::processed);
    auto first = b.store.begin();
    BOOST_TEST((first.store_message(row) == si::stored_as::inserted));
    std::atomic<bool> returned{false};
    std::optional<si::stored_as> second;
    std::thread writer([&] {
        second = b.store.store_message(row);
        returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    BOOST_TEST(!returned.load());  // waiting for `first`
    first.commit();
    writer.join();
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST((*second == si::stored_as::left_existing));
    expect_rows(b, "OrderCreated", "c1", {"PROCESSED"});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_delivery_reads_its_keys_rows_once_it_holds_the_instance_lock, Backend, backends) {
    // A buffering claim transaction died while its WAITING row, written beside it, was in flight.
    // The redelivery claims the key and waits for the instance lock, held by a release pass; the
    // WAITING row commits and that pass replays it. The redelivery must then see the replay.
    Backend b;
    harness<Backend> h(b);
    const auto created = conf::order_row(b, "o1", "OrderCreated", "c1", si::message_state::processed);
    auto release_pass = b.store.begin();
    release_pass.lock_instance(created.instance);
    std::optional<si::delivery_result> redelivered;
    std::thread redelivery([&] { redelivered = h.deliver(si::testing::record("OrderValidated", "v1", "o1")); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the redelivery waits for the lock

    b.store.store_message(conf::order_row(b, "o1", "OrderValidated", "v1", si::message_state::waiting));
    const auto waiting = b.messages_with_key({"OrderValidated", "v1"});
    BOOST_TEST_REQUIRE(waiting.size() == 1u);
    release_pass.insert_message(created);
    release_pass.update_message_state(waiting.front().id, si::message_state::processed, b.clock.now());  // replayed
    release_pass.commit();
    redelivery.join();

    BOOST_TEST_REQUIRE(redelivered.has_value());
    expect_outcome(*redelivered, outcome::duplicate);
    BOOST_TEST(h.log.size() == 0u);  // the listener ran once, in the release pass
    expect_rows(b, "OrderValidated", "v1", {"PROCESSED"});
}

BOOST_AUTO_TEST_SUITE_END()
