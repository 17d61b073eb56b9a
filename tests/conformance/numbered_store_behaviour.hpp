#pragma once
// The conformance suite's store-level cases of numbered sequences (seqinbox/declare/numbering.hpp):
// a row's number, last_released_number, waiting_numbered, skip_numbers and stalled_numbered, as
// every store must answer them. Include it after conformance/behaviour.hpp.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conformance/harness.hpp"

namespace seqinbox::conformance {

/// A numbered row of the order sequence's instance for `context_id`.
template <class B>
message_record numbered_row(B& b, const std::string& context_id, const std::string& id, std::int64_t number, message_state state) {
    message_record row = order_row(b, context_id, "OrderCreated", id, state);
    row.number = number;
    if (state == message_state::waiting) row.payload = testing::record("OrderCreated", id, context_id);
    return row;
}

/// A number, or -1 for none (printable by Boost.Test).
inline std::int64_t or_none(const std::optional<std::int64_t>& n) { return n.value_or(-1); }

/// The numbers of `rows`, in their order.
inline std::vector<std::int64_t> numbers_of(const std::vector<message_record>& rows) {
    std::vector<std::int64_t> numbers;
    for (const auto& r : rows) numbers.push_back(r.number.value_or(-1));
    return numbers;
}

}  // namespace seqinbox::conformance

BOOST_AUTO_TEST_SUITE(numbered_store)

namespace conf = seqinbox::conformance;
namespace si = seqinbox;

BOOST_AUTO_TEST_CASE_TEMPLATE(a_rows_number_is_kept_by_every_write_and_read, Backend, backends) {
    Backend b;
    auto tx = b.store.begin();
    tx.store_message(conf::numbered_row(b, "o1", "n7", 7, si::message_state::waiting));
    auto unnumbered = conf::order_row(b, "o1", "OrderCreated", "plain", si::message_state::processed);
    tx.store_message(unnumbered);
    tx.commit();
    BOOST_TEST(conf::or_none(b.messages_with_key({"OrderCreated", "n7"}).front().number) == 7);
    BOOST_TEST(!b.messages_with_key({"OrderCreated", "plain"}).front().number.has_value());
    auto reader = b.store.begin();
    BOOST_TEST(conf::or_none(reader.find_messages({"OrderCreated", "n7"}).front().number) == 7);
    const auto instance = b.find_instance("OrderSequence", "o1")->id;
    const std::vector<std::string> types{"OrderCreated"};
    BOOST_TEST(conf::or_none(reader.waiting_messages(instance, types).front().number) == 7);
    reader.rollback();
    // A FAILED row taken over by a new delivery of its key takes the new row's number too.
    b.store.store_message(conf::numbered_row(b, "o1", "f", 3, si::message_state::failed));
    b.store.store_message(conf::numbered_row(b, "o1", "f", 4, si::message_state::waiting));
    const auto taken_over = b.messages_with_key({"OrderCreated", "f"});
    BOOST_TEST_REQUIRE(taken_over.size() == 1u);
    BOOST_TEST(conf::or_none(taken_over.front().number) == 4);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(last_released_number_is_the_highest_processed_or_skipped, Backend, backends) {
    Backend b;
    auto tx = b.store.begin();
    tx.store_message(conf::numbered_row(b, "o1", "w", 5, si::message_state::waiting));  // made instance o1
    tx.commit();
    const auto instance = b.find_instance("OrderSequence", "o1")->id;
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == -1, "nothing processed, nothing skipped");
    for (auto [id, n, state] : {std::tuple{"p1", 1, si::message_state::processed}, std::tuple{"p3", 3, si::message_state::processed},
                                std::tuple{"f9", 9, si::message_state::failed}, std::tuple{"w8", 8, si::message_state::waiting}})
        b.store.store_message(conf::numbered_row(b, "o1", id, n, state));
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == 3, "FAILED and WAITING do not count");
    auto own = b.store.begin();
    own.lock_instance(instance);
    own.store_message(conf::numbered_row(b, "o1", "p4", 4, si::message_state::processed));
    BOOST_TEST(conf::or_none(own.last_released_number(instance)) == 4, "its own PROCESSED row");
    own.skip_numbers(instance, 6);
    BOOST_TEST(conf::or_none(own.last_released_number(instance)) == 6, "its own skip");
    own.skip_numbers(instance, 2);
    BOOST_TEST(conf::or_none(own.last_released_number(instance)) == 6, "a lower skip changes nothing");
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == 3, "not another's uncommitted writes");
    own.commit();
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == 6);
    b.store.store_message(conf::numbered_row(b, "o1", "p20", 20, si::message_state::processed));
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == 20, "a processed number above the skip");
    auto undone = b.store.begin();
    undone.lock_instance(instance);
    undone.skip_numbers(instance, 50);
    undone.rollback();
    BOOST_TEST(conf::or_none(b.store.begin().last_released_number(instance)) == 20, "a rolled-back skip");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(waiting_numbered_gives_waiting_rows_from_a_number_in_number_order, Backend, backends) {
    Backend b;
    for (auto [id, n] : {std::pair{"w9", 9}, std::pair{"w4", 4}, std::pair{"w6", 6}, std::pair{"w5", 5}, std::pair{"w2", 2}})
        b.store.store_message(conf::numbered_row(b, "o1", id, n, si::message_state::waiting));
    b.store.store_message(conf::numbered_row(b, "o1", "p7", 7, si::message_state::processed));
    b.store.store_message(conf::numbered_row(b, "o2", "x5", 5, si::message_state::waiting));  // another instance
    const auto instance = b.find_instance("OrderSequence", "o1")->id;
    auto tx = b.store.begin();
    tx.lock_instance(instance);
    auto from4 = tx.waiting_numbered(instance, 4, 10);
    BOOST_TEST(conf::numbers_of(from4) == (std::vector<std::int64_t>{4, 5, 6, 9}));
    BOOST_TEST_REQUIRE(!from4.empty());
    BOOST_TEST(from4.front().payload.has_value(), "with payload, for the replay");
    BOOST_TEST(from4.front().idempotence_id == "w4");
    BOOST_TEST(conf::numbers_of(tx.waiting_numbered(instance, 5, 2)) == (std::vector<std::int64_t>{5, 6}), "at most `limit`");
    BOOST_TEST(tx.waiting_numbered(instance, 10, 5).empty());
    // Its own writes: a new WAITING row and one made PROCESSED.
    tx.store_message(conf::numbered_row(b, "o1", "w3", 3, si::message_state::waiting));
    const auto w4 = b.messages_with_key({"OrderCreated", "w4"}).front();
    tx.update_message_state(w4.id, si::message_state::processed, w4.created_at);
    BOOST_TEST(conf::numbers_of(tx.waiting_numbered(instance, 3, 3)) == (std::vector<std::int64_t>{3, 5, 6}));
    BOOST_TEST(conf::numbers_of(b.store.begin().waiting_numbered(instance, 0, 10)) == (std::vector<std::int64_t>{2, 4, 5, 6, 9}),
               "not another's uncommitted writes");
    tx.rollback();
}

BOOST_AUTO_TEST_CASE_TEMPLATE(stalled_numbered_finds_open_instances_with_old_numbered_waiting_rows, Backend, backends) {
    Backend b;
    const auto t0 = b.clock.now();
    b.store.store_message(conf::numbered_row(b, "old1", "a", 2, si::message_state::waiting));
    b.store.store_message(conf::numbered_row(b, "done", "p", 1, si::message_state::processed));
    b.store.store_message(conf::order_row(b, "plain", "OrderValidated", "v", si::message_state::waiting));  // no number
    b.store.store_message(conf::numbered_row(b, "old2", "b", 7, si::message_state::waiting));
    b.clock.advance(std::chrono::minutes(10));
    b.store.store_message(conf::numbered_row(b, "young", "c", 3, si::message_state::waiting));
    const auto old1 = b.find_instance("OrderSequence", "old1")->id, old2 = b.find_instance("OrderSequence", "old2")->id;
    si::scan_position after;
    BOOST_TEST(b.store.stalled_numbered("OrderSequence", t0 + std::chrono::minutes(1), 1, after) == std::vector<si::instance_id>{old1});
    BOOST_TEST(after.id == old1);
    BOOST_TEST(b.store.stalled_numbered("OrderSequence", t0 + std::chrono::minutes(1), 5, after) == std::vector<si::instance_id>{old2},
               "from where the last batch stopped");
    BOOST_TEST(b.store.stalled_numbered("OrderSequence", t0 + std::chrono::minutes(1), 5, after).empty());
    si::scan_position fresh;
    BOOST_TEST(b.store.stalled_numbered("OtherSequence", t0 + std::chrono::hours(1), 5, fresh).empty(), "another sequence");
    BOOST_TEST(b.store.stalled_numbered("OrderSequence", t0 + std::chrono::hours(1), 5, fresh).size() == 3u, "the young one too, later");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_instance_view_shows_where_a_numbered_instance_stands, Backend, backends) {
    Backend b;
    for (auto [id, n] : {std::pair{"w9", 9}, std::pair{"w4", 4}, std::pair{"w6", 6}, std::pair{"twin6", 6}})
        b.store.store_message(conf::numbered_row(b, "o1", id, n, si::message_state::waiting));
    b.store.store_message(conf::numbered_row(b, "o1", "p2", 2, si::message_state::processed));
    auto view = b.store.view_instance("OrderSequence", "o1");
    BOOST_TEST_REQUIRE(view.has_value());
    BOOST_TEST(conf::or_none(view->numbering.last_released) == 2);
    BOOST_TEST(view->numbering.waiting == (std::vector<std::int64_t>{4, 6, 9}), "each number once");
    const auto missing = si::missing_numbers(view->numbering);
    BOOST_TEST_REQUIRE(missing.size() == 3u);
    BOOST_TEST((missing[0] == std::pair<std::int64_t, std::int64_t>{3, 3}));
    BOOST_TEST((missing[1] == std::pair<std::int64_t, std::int64_t>{5, 5}));
    BOOST_TEST((missing[2] == std::pair<std::int64_t, std::int64_t>{7, 8}));
    const auto instance = view->instance.id;
    auto tx = b.store.begin();
    tx.lock_instance(instance);
    tx.skip_numbers(instance, 5);
    tx.commit();
    BOOST_TEST(conf::or_none(b.store.view_instance(instance)->numbering.last_released) == 5, "skipped through");
    b.store.store_message(conf::order_row(b, "plain", "OrderCreated", "x", si::message_state::waiting));
    const auto plain = b.store.view_instance("OrderSequence", "plain");
    BOOST_TEST(!plain->numbering.last_released.has_value());
    BOOST_TEST(plain->numbering.waiting.empty(), "a message without a number is not listed");
}

BOOST_AUTO_TEST_SUITE_END()
