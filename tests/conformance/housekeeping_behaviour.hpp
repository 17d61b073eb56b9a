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
