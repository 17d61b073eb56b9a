// Every error-sink record names its failure kind (seqinbox/failure_kind.hpp) beside its text: one
// case per kind the engine and the housekeeper produce.
#define BOOST_TEST_MODULE failure_kinds
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <ostream>
#include <stdexcept>
#include <string>

#include "polling_world.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/testing.hpp"

using namespace seqinbox;
using world = testing::polling_world;
using testing::single;

namespace seqinbox {
inline std::ostream& operator<<(std::ostream& out, failure_kind k) { return out << to_string(k); }
}  // namespace seqinbox

namespace {

/// The kind of the only error-sink record.
failure_kind only_kind(const world& w) {
    BOOST_TEST_REQUIRE(w.sink.size() == 1u);
    return w.sink.records()[0].kind;
}

/// Decodes as header_decoder does until `refuse` is set: a schema change after buffering.
struct changing_decoder : decoder::header_decoder {
    static inline bool refuse = false;
    decoded<std::string> decode(const envelope& e) const {
        if (refuse) throw error(error_category::bad_message, "the schema changed");
        return header_decoder::decode(e);
    }
};
struct changing_policies : default_policies {
    using decoder = changing_decoder;
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_kind_has_a_stable_name_that_parses_back) {
    for (failure_kind k : all_failure_kinds) BOOST_TEST((parse_failure_kind(to_string(k)) == k));
    BOOST_TEST(to_string(failure_kind::removed_by_housekeeping) == "removed_by_housekeeping");
    BOOST_TEST(!parse_failure_kind("listener failed").has_value());
}

BOOST_AUTO_TEST_CASE(a_throwing_listener_is_listener_failed) {
    world w;
    auto inbox = std::make_unique<memory::inbox>(w.store, w.source, w.sink, single(testing::declare("OrderCreated")));
    inbox->on("OrderCreated", [](const testing::message&, const memory::inbox::context&) { throw std::runtime_error("boom"); });
    BOOST_TEST((w.poll(*inbox, testing::record("OrderCreated", "c1", "o1")).outcome == outcome::failed));
    BOOST_TEST(only_kind(w) == failure_kind::listener_failed);
}

BOOST_AUTO_TEST_CASE(a_listener_names_its_kind_with_listener_failure) {
    world w;
    auto inbox = std::make_unique<memory::inbox>(w.store, w.source, w.sink, single(testing::declare("OrderCreated")));
    inbox->on("OrderCreated", [](const testing::message&, const memory::inbox::context&) {
        throw listener_failure(failure_kind::publish_failed, "broker gone");
    });
    BOOST_TEST((w.poll(*inbox, testing::record("OrderCreated", "c1", "o1")).outcome == outcome::failed));
    BOOST_TEST(only_kind(w) == failure_kind::publish_failed);
    BOOST_TEST(w.sink.records()[0].reason == "publish_failed: broker gone");
}

BOOST_AUTO_TEST_CASE(rejections_name_their_kind) {
    world w;
    auto declared = single(testing::declare("Check", {}, "X"));
    declared.resolvers["Check"] = {[](const testing::message& m, const envelope&) -> std::string { return m == "y" ? "Y" : "X"; }, {"X"}};
    declared.sequences.front().messages.push_back(testing::declare("Order"));
    declared.sequences.front().messages.back().missing_context_id = missing_context_id_policy::dead_letter;
    declared.sequences.front().messages.back().filter = [](const testing::message& m, const envelope&) -> bool {
        if (m == "bad") throw std::runtime_error("filter broke");
        return true;
    };
    auto inbox = w.make(std::move(declared));
    envelope undecodable = testing::record("Order", "u1", "o1");
    undecodable.headers.clear();
    const std::pair<envelope, failure_kind> cases[] = {
        {undecodable, failure_kind::undecodable},
        {testing::record("Unknown", "x1", "o1"), failure_kind::unknown_type},
        {testing::record("Check", "k1", "o1", "y"), failure_kind::bad_subtype},
        {testing::record("Order", "f1", "o1", "bad"), failure_kind::unclassifiable},
        {testing::record("Order", "n1", ""), failure_kind::no_context_id},
        {testing::record("Order", std::string(1, '\0'), "o1"), failure_kind::unstorable_key},
    };
    for (std::size_t i = 0; i < std::size(cases); ++i) {
        BOOST_TEST((w.poll(*inbox, cases[i].first).outcome == outcome::rejected), i);
        BOOST_TEST_REQUIRE(w.sink.size() == i + 1);
        BOOST_TEST(w.sink.records()[i].kind == cases[i].second, "case " << i << ": " << w.sink.records()[i].reason);
    }
}

BOOST_AUTO_TEST_CASE(a_buffered_record_that_no_longer_decodes_is_undecodable_on_replay) {
    world w;
    changing_decoder::refuse = false;
    basic_inbox<memory::store, memory::source, memory::error_sink, changing_policies> inbox(w.store, w.source, w.sink,
                                                                                           testing::order_declarations());
    for (const auto& m : inbox.declared().sequences.front().messages)
        inbox.on(m.qualified_type(), [](const testing::message&, const auto& ctx) {
            if (ctx.qualified_type == "OrderCreated") changing_decoder::refuse = true;  // it decoded already
        });
    w.source.push(testing::record("OrderValidated", "v1", "o1"));
    BOOST_TEST((inbox.poll_once()->outcome == outcome::buffered));
    w.source.push(testing::record("OrderCreated", "c1", "o1"));
    BOOST_TEST((inbox.poll_once()->outcome == outcome::processed));
    changing_decoder::refuse = false;
    BOOST_TEST(only_kind(w) == failure_kind::undecodable_on_replay);
    BOOST_TEST(w.sink.records()[0].reason.find("the schema changed") != std::string::npos);
    BOOST_TEST((w.store.messages_with_key({"OrderValidated", "v1"}).at(0).state == message_state::failed));
}

BOOST_AUTO_TEST_CASE(a_waiting_message_of_a_removed_instance_is_removed_by_housekeeping) {
    world w;
    auto inbox = w.make(testing::order_declarations());
    BOOST_TEST((w.poll(*inbox, testing::record("OrderValidated", "v1", "o1")).outcome == outcome::buffered));
    clock::manual_clock later;
    later.set(std::chrono::system_clock::now() + std::chrono::hours(48));
    housekeeping_options options;
    options.removal_delay = std::chrono::seconds(0);
    basic_housekeeper<memory::store, memory::error_sink, clock::manual_clock> housekeeper(w.store, w.sink, options, later);
    housekeeper.run_once();
    BOOST_TEST(only_kind(w) == failure_kind::removed_by_housekeeping);
}
