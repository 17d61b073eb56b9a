#pragma once
// The conformance suite, housekeeping at the store's contract (seqinbox/store/housekeeping.hpp):
// what removal checks again under the instance locks, the pages of WAITING messages it forwards,
// and the order closed cleanup finds instances in. Include it after conformance/behaviour.hpp.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "conformance/behaviour.hpp"

namespace seqinbox::conformance {

/// The pages a removal forwarded: per call, the ids and the bytes of the records.
struct forwarded_pages {
    std::vector<std::vector<message_id>> ids;
    std::vector<std::size_t> bytes;

    forward_waiting recorder() {
        return [this](const sequence_instance&, std::span<const message_record> page) {
            auto& listed = ids.emplace_back();
            std::size_t size = 0;
            for (const auto& m : page) {
                listed.push_back(m.id);
                if (m.payload) size += m.payload->value.value_or("").size();
            }
            bytes.push_back(size);
        };
    }
    std::vector<message_id> all() const {
        std::vector<message_id> flat;
        for (const auto& page : ids) flat.insert(flat.end(), page.begin(), page.end());
        return flat;
    }
};

inline const forward_waiting ignore_waiting = [](const sequence_instance&, std::span<const message_record>) {};

/// Stores `count` WAITING rows with values of `value_bytes` bytes for the instance of `context_id`.
template <class B>
void insert_waiting(B& b, const std::string& context_id, std::size_t count, std::size_t value_bytes) {
    auto tx = b.store.begin();
    for (std::size_t i = 0; i < count; ++i) {
        auto row = order_row(b, context_id, "OrderValidated", context_id + "-w" + std::to_string(i), message_state::waiting);
        envelope payload;
        payload.value = std::string(value_bytes, static_cast<char>('a' + i % 26));
        payload.topic = "orders";
        row.payload = payload;
        tx.insert_message(row);
    }
    tx.commit();
}

/// Marks the instances past their retention at the clock's time for removal at once, and returns
/// those the removal job finds.
template <class B>
std::vector<instance_id> found_for_removal(B& b) {
    scan_position marking, finding;
    b.store.mark_expired(b.clock.now(), std::chrono::seconds(0), 100, marking);
    return b.store.removable_instances(b.clock.now(), 100, finding);
}

}  // namespace seqinbox::conformance

BOOST_AUTO_TEST_SUITE(sequential_inbox_housekeeping)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;
using conf::expect_outcome;
using conf::harness;
using si::outcome;

BOOST_AUTO_TEST_CASE_TEMPLATE(removal_keeps_an_instance_closed_after_it_was_found, Backend, backends) {
    // A close committed between finding and removing starts the deduplication window: deleting
    // the instance would drop its claims, and late duplicates would be processed again.
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    b.clock.advance(24h + 1s);
    const auto found = conf::found_for_removal(b);
    BOOST_TEST_REQUIRE(found.size() == 1u);
    BOOST_TEST(seqinbox::accepted(b.store.request_instance_action(found.front(), si::instance_action::close, b.clock.now())));
    BOOST_TEST_REQUIRE(h.inbox->run_pending_actions() == 1u);

    conf::forwarded_pages pages;
    BOOST_TEST(b.store.remove_instances(found, si::removal_condition::expired(b.clock.now()), pages.recorder()) == 0u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    BOOST_TEST(pages.ids.empty());
    BOOST_TEST(b.messages_with_key({"OrderValidated", "v1"}).size() == 1u);
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::duplicate);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(closed_cleanup_checks_the_window_again_when_removing, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    conf::complete_order(h, "o1");
    b.clock.advance(1h);
    const std::vector<si::deduplication_window> found_by{{conf::order_sequence, 0s}}, now_kept_for{{conf::order_sequence, 2h}};
    si::scan_position after;
    const auto found = b.store.closed_instances(b.clock.now(), found_by, 10, after);
    BOOST_TEST_REQUIRE(found.size() == 1u);

    const auto longer = si::removal_condition::window_passed(b.clock.now(), now_kept_for);
    BOOST_TEST(b.store.remove_instances(found, longer, conf::ignore_waiting) == 0u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "CLOSED");
    BOOST_TEST(b.has_claim({"OrderCreated", "OrderCreated@o1"}));
    // Not a removal's instance either: an OPEN-only condition keeps a CLOSED one.
    BOOST_TEST(b.store.remove_instances(found, si::removal_condition::expired(b.clock.now()), conf::ignore_waiting) == 0u);

    BOOST_TEST(b.store.remove_instances(found, si::removal_condition::window_passed(b.clock.now(), found_by), conf::ignore_waiting) == 1u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "absent");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(closed_instances_come_by_the_end_of_their_window, Backend, backends) {
    // o1 is created first but closes last: it comes after o2, whose window ends first. A sequence
    // not listed keeps its instances for their retention (24 h).
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    expect_outcome(h.deliver("OrderValidated", "OrderValidated@o1", "o1"), outcome::buffered);
    conf::complete_order(h, "o2");
    b.clock.advance(2h);
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@o1", "o1"), outcome::processed);
    for (const char* type : {"OrderPrepared", "OrderExpedited", "OrderShipped"})
        expect_outcome(h.deliver(type, std::string(type) + "@o1", "o1"), outcome::processed);
    BOOST_TEST_REQUIRE(conf::instance_state_of(b, "o1") == "CLOSED");
    const auto o1 = conf::instance_id_of(b, "o1"), o2 = conf::instance_id_of(b, "o2");
    const std::vector<si::deduplication_window> hour{{"Other", 0s}, {conf::order_sequence, 1h}};

    si::scan_position after;
    BOOST_TEST(b.store.closed_instances(b.clock.now(), hour, 10, after).size() == 1u);  // o2's window ended, o1's not
    b.clock.advance(1h);
    after = {};
    BOOST_TEST(b.store.closed_instances(b.clock.now(), hour, 1, after) == std::vector<si::instance_id>{o2}, boost::test_tools::per_element());
    BOOST_TEST(b.store.closed_instances(b.clock.now(), hour, 1, after) == std::vector<si::instance_id>{o1}, boost::test_tools::per_element());
    BOOST_TEST(b.store.closed_instances(b.clock.now(), hour, 1, after).empty());

    const std::vector<si::deduplication_window> unlisted{{"Other", 0s}};
    after = {};
    BOOST_TEST(b.store.closed_instances(b.clock.now(), unlisted, 10, after).empty());  // 3 h of 24
    b.clock.advance(21h);  // o2 closed 24 h ago, o1 22 h ago
    BOOST_TEST(b.store.closed_instances(b.clock.now(), unlisted, 10, after) == std::vector<si::instance_id>{o2}, boost::test_tools::per_element());
    b.clock.advance(2h);
    BOOST_TEST(b.store.closed_instances(b.clock.now(), unlisted, 10, after) == std::vector<si::instance_id>{o1}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(waiting_messages_are_forwarded_in_bounded_pages, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    const std::size_t large = si::forward_page_bytes / 3 + 1;  // two fit in a page, not three
    conf::insert_waiting(b, "o1", 5, large);
    conf::insert_waiting(b, "o2", si::forward_page_rows + 1, 10);
    b.clock.advance(24h + 1s);
    const auto found = conf::found_for_removal(b);
    BOOST_TEST_REQUIRE(found.size() == 2u);

    conf::forwarded_pages pages;
    BOOST_TEST(b.store.remove_instances(found, si::removal_condition::expired(b.clock.now()), pages.recorder()) == 2u);
    std::vector<si::message_id> sorted = pages.all();
    BOOST_TEST(sorted.size() == 5u + si::forward_page_rows + 1);
    std::ranges::sort(sorted);
    BOOST_TEST((std::ranges::adjacent_find(sorted) == sorted.end()));  // each once
    BOOST_TEST(pages.ids.size() == 3u + 2u);  // o1: 2 + 2 + 1, o2: 1000 + 1
    for (std::size_t i = 0; i < pages.ids.size(); ++i) {
        BOOST_TEST(pages.ids[i].size() <= si::forward_page_rows);
        BOOST_TEST(pages.bytes[i] <= si::forward_page_bytes);
        BOOST_TEST(std::ranges::is_sorted(pages.ids[i]));
    }
    BOOST_TEST(b.messages().empty());
    BOOST_TEST(b.instances().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_sink_failing_on_a_later_page_keeps_the_instance_and_all_its_messages, Backend, backends) {
    using namespace std::chrono_literals;
    Backend b;
    harness<Backend> h(b);
    conf::insert_waiting(b, "o1", 7, si::forward_page_bytes / 3 + 1);  // four pages
    b.clock.advance(24h + 1s);
    const auto found = conf::found_for_removal(b);
    BOOST_TEST_REQUIRE(found.size() == 1u);

    std::size_t calls = 0;
    const si::forward_waiting failing_third = [&](const si::sequence_instance&, std::span<const si::message_record>) {
        if (++calls == 3) throw std::runtime_error("dead-letter topic unavailable");
    };
    BOOST_CHECK_THROW(b.store.remove_instances(found, si::removal_condition::expired(b.clock.now()), failing_third), std::runtime_error);
    BOOST_TEST(calls == 3u);
    BOOST_TEST(conf::instance_state_of(b, "o1") == "OPEN");
    BOOST_TEST(b.messages().size() == 7u);

    conf::forwarded_pages pages;
    BOOST_TEST(b.store.remove_instances(found, si::removal_condition::expired(b.clock.now()), pages.recorder()) == 1u);
    BOOST_TEST(pages.all().size() == 7u);
    BOOST_TEST(b.messages().empty());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- housekeeping through the housekeeper ----

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

BOOST_AUTO_TEST_SUITE_END()
