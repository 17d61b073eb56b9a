// Numbered sequences on the PostgreSQL store, on the paths the conformance cases do not reach:
// a message's number written by the deferred stores (one row, and many in one
// seqinbox_store_messages call, numbered or not), read by the claim and claim_batch round trips,
// the test-support insert, the views, the action targets and the pages a removal forwards.
#define BOOST_TEST_MODULE seqinbox postgresql numbered
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

struct numbered_fixture {
    static std::string migrated_database() {
        std::string conninfo = pg_server::shared().create_database();
        pg::migrate(conninfo);
        return conninfo;
    }

    static pg::store_options options(const std::string& conninfo) {
        pg::store_options o;
        o.conninfo = conninfo;
        o.pool_size = 4;
        return o;
    }

    si::instance_id instance(const std::string& context_id) {
        return store.create_or_get_instance("OrderSequence", context_id, now, now + 24h).id;
    }

    /// A row of `instance`; WAITING rows carry their record, as buffered deliveries do.
    si::message_record row(si::instance_id in, const std::string& id, si::message_state state, std::optional<std::int64_t> number) const {
        si::message_record r;
        r.instance = in;
        r.type = "OrderCreated";
        r.idempotence_id = id;
        r.state = state;
        r.created_at = r.state_changed_at = now;
        r.number = number;
        if (state == si::message_state::waiting) r.payload = si::testing::record("OrderCreated", id, "o1");
        return r;
    }

    si::claim_request request(const std::string& id, si::instance_id in) const { return {{"OrderCreated", id}, in, now}; }

    /// The stored number of the key's row, -1 for NULL (read directly, not through the store).
    std::int64_t stored_number(const std::string& id) {
        return seqinbox::test::count(admin, "SELECT COALESCE(sequence_number, -1) FROM sequenced_message WHERE message_type = 'OrderCreated'"
                                            " AND idempotence_id = '" + id + "'");
    }

    const si::timestamp now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    std::string conninfo = migrated_database();
    pg::store store{options(conninfo)};
    soci::session admin{soci::postgresql, conninfo};
};

std::int64_t or_none(const std::optional<std::int64_t>& n) { return n.value_or(-1); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(numbered, numbered_fixture)

// The claim of a key without rows lets its store wait for the commit (no round trip of its own):
// the deferred row keeps its number.
BOOST_AUTO_TEST_CASE(a_store_deferred_after_a_won_claim_keeps_the_number) {
    const auto o1 = instance("o1");
    auto tx = store.begin();
    BOOST_TEST_REQUIRE(tx.claim(request("n5", o1)).won);
    const auto before = store.statistics().round_trips;
    BOOST_TEST((tx.store_message(row(o1, "n5", si::message_state::waiting, 5)) == si::stored_as::inserted));
    BOOST_TEST(store.statistics().round_trips == before, "deferred: no round trip of its own");
    tx.commit();
    BOOST_TEST(stored_number("n5") == 5);
}

// Many deferred stores travel as one seqinbox_store_messages call: numbered rows beside one
// without a number. The claims read the numbers of the rows their keys had.
BOOST_AUTO_TEST_CASE(a_batch_claim_reads_numbers_and_its_deferred_stores_write_them) {
    const auto o1 = instance("o1");
    BOOST_TEST_REQUIRE((store.store_message(row(o1, "failed", si::message_state::failed, 3)) == si::stored_as::inserted));
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("failed", o1), request("a", o1), request("b", o1), request("plain", o1)};
    const auto claims = tx.claim_batch(requests);
    BOOST_TEST_REQUIRE(claims.size() == 4u);
    BOOST_TEST_REQUIRE(claims[0].rows.size() == 1u);
    BOOST_TEST(or_none(claims[0].rows.front().number) == 3, "the claim's round trip reads the number");
    tx.store_message(row(o1, "a", si::message_state::waiting, 11));
    tx.store_message(row(o1, "b", si::message_state::processed, 10));
    tx.store_message(row(o1, "plain", si::message_state::processed, std::nullopt));
    BOOST_TEST((tx.store_message(row(o1, "failed", si::message_state::processed, 4)) == si::stored_as::updated));
    BOOST_TEST(or_none(tx.last_released_number(o1)) == 10, "the deferred stores went first");
    tx.commit();
    BOOST_TEST(stored_number("a") == 11);
    BOOST_TEST(stored_number("b") == 10);
    BOOST_TEST(stored_number("plain") == -1);
    BOOST_TEST(stored_number("failed") == 4, "a FAILED row taken over takes the new number");

    auto again = store.begin();
    const auto single = again.claim(request("b", o1));  // the claim was kept: lost, nothing read
    BOOST_TEST(!single.won);
    again.delete_claim({"OrderCreated", "a"});
    again.commit();
    auto reclaim = store.begin();
    const auto won = reclaim.claim(request("a", o1));
    BOOST_TEST_REQUIRE(won.rows.size() == 1u);
    BOOST_TEST(or_none(won.rows.front().number) == 11, "claim reads the number too");
    reclaim.rollback();
}

// The rows a transaction inserts as they are (test support), with and without a record.
BOOST_AUTO_TEST_CASE(an_inserted_row_keeps_its_number) {
    const auto o1 = instance("o1");
    auto tx = store.begin();
    tx.insert_message(row(o1, "w", si::message_state::waiting, 8));
    tx.insert_message(row(o1, "p", si::message_state::processed, 7));
    tx.insert_message(row(o1, "none", si::message_state::processed, std::nullopt));
    tx.commit();
    BOOST_TEST(stored_number("w") == 8);
    BOOST_TEST(stored_number("p") == 7);
    BOOST_TEST(stored_number("none") == -1);
}

BOOST_AUTO_TEST_CASE(views_action_targets_and_removal_pages_carry_the_number) {
    const auto o1 = instance("o1");
    store.store_message(row(o1, "w", si::message_state::waiting, 2));
    store.store_message(row(o1, "p", si::message_state::processed, 1));
    const auto found = store.find_message(si::claim_key{"OrderCreated", "w"});
    BOOST_TEST_REQUIRE(found.has_value());
    BOOST_TEST(or_none(found->message.number) == 2);
    const auto view = store.view_instance(o1);
    BOOST_TEST_REQUIRE(view.has_value());
    BOOST_TEST_REQUIRE(view->messages.size() == 2u);
    BOOST_TEST(or_none(view->messages[0].number) == 2);
    BOOST_TEST(or_none(view->messages[1].number) == 1);

    auto tx = store.begin();
    tx.lock_instance(o1);
    const std::vector<si::message_id> ids{found->message.id};
    const auto targets = tx.action_targets(o1, ids);
    BOOST_TEST_REQUIRE(targets.size() == 1u);
    BOOST_TEST(or_none(targets.front().number) == 2);
    const auto waiting = tx.waiting_numbered(o1, 0, 5);
    BOOST_TEST_REQUIRE(waiting.size() == 1u);
    BOOST_TEST(waiting.front().instance == o1);
    BOOST_TEST(waiting.front().payload.has_value());
    tx.rollback();

    std::vector<std::int64_t> forwarded;
    seqinbox::test::mark_due_for_removal(conninfo, o1);
    const si::forward_waiting forward = [&](const si::sequence_instance&, std::span<const si::message_record> rows) {
        for (const auto& r : rows) forwarded.push_back(or_none(r.number));
    };
    BOOST_TEST(store.remove_instance(o1, si::removal_condition::expired(now + 48h), forward));
    BOOST_TEST(forwarded == std::vector<std::int64_t>{2});
}

// skip_numbers touches the instance row only when it raises the number: a lower one writes no
// row version. A store written before V10 (NULL numbers) answers as an instance without numbers.
BOOST_AUTO_TEST_CASE(skip_numbers_writes_only_a_raise) {
    const auto o1 = instance("o1");
    const auto version = [&] {
        std::string ctid;
        admin << "SELECT CAST(ctid AS text) FROM sequence_instance WHERE id = " + std::to_string(o1), soci::into(ctid);
        return ctid;
    };
    auto tx = store.begin();
    tx.lock_instance(o1);
    BOOST_TEST(!tx.last_released_number(o1).has_value());
    tx.skip_numbers(o1, 5);
    tx.commit();
    const auto raised = version();
    auto lower = store.begin();
    lower.lock_instance(o1);
    lower.skip_numbers(o1, 3);
    BOOST_TEST(or_none(lower.last_released_number(o1)) == 5);
    lower.commit();
    BOOST_TEST(version() == raised);
}

BOOST_AUTO_TEST_SUITE_END()
