// The simulator's own parts: the checks fail when they must, draws are reproducible, and a
// recorded run replays exactly.
#define BOOST_TEST_MODULE sim_checks
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "chooser.hpp"
#include "declaration_gen.hpp"
#include "listener_probe.hpp"
#include "random.hpp"
#include "scenario.hpp"
#include "shrink.hpp"
#include "simulation.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using namespace seqinbox::sim;

namespace {

/// T0; T1 after T0.
declarations<message> two_types() {
    sequence_declaration<message> seq;
    seq.name = "S";
    seq.retention = std::chrono::hours(1);
    seq.messages = {testing::declare("T0"), testing::declare("T1", after("T0"))};
    declarations<message> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

std::vector<std::string> kinds(const violation_log& log) {
    std::vector<std::string> names;
    for (const auto& v : log.all()) names.push_back(v.kind);
    return names;
}

struct probe_fixture {
    violation_log log;
    listener_probe probe{two_types(), log};
    const claim_key t0{"T0", "m0"};
    const claim_key t1{"T1", "m1"};
};

bool never_durable(const claim_key&) { return false; }

}  // namespace

BOOST_FIXTURE_TEST_CASE(two_listeners_of_one_key_in_flight_are_a_violation, probe_fixture) {
    probe.enter(0, t0, "ctx");
    probe.enter(1, t0, "ctx");
    BOOST_TEST(kinds(log) == std::vector<std::string>{"listener_overlap_key"});
}

BOOST_FIXTURE_TEST_CASE(two_listeners_of_one_context_in_flight_are_a_violation, probe_fixture) {
    probe.enter(0, t0, "ctx");
    probe.leave(0, true);
    probe.enter(0, {"T0", "m2"}, "ctx");
    probe.enter(1, t1, "ctx");
    BOOST_TEST(kinds(log) == std::vector<std::string>{"listener_overlap_context"});
}

BOOST_FIXTURE_TEST_CASE(a_listener_before_its_predecessor_succeeded_is_a_violation, probe_fixture) {
    probe.enter(0, t0, "ctx");
    probe.leave(0, false);  // failed: T0 has not succeeded
    probe.enter(1, t1, "ctx");
    probe.leave(1, true);
    probe.enter(0, t1, "other");  // T0 succeeded in "ctx" only
    BOOST_TEST(kinds(log) == (std::vector<std::string>{"listener_out_of_order", "listener_out_of_order"}));
}

BOOST_FIXTURE_TEST_CASE(successes_are_counted_per_key, probe_fixture) {
    probe.enter(0, t0, "ctx");
    probe.leave(0, true);
    probe.enter(1, t1, "ctx");
    probe.leave(1, true);
    BOOST_TEST(log.empty());
    BOOST_TEST(probe.successes(t0) == 1u);
    BOOST_TEST(probe.successes(t1) == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_listener_orphaned_by_a_lost_connection_opens_the_window, probe_fixture) {
    probe.enter(0, t0, "ctx");
    BOOST_TEST(probe.connection_lost(0, never_durable) == 1u);
    probe.enter(1, t0, "ctx");  // the waiting duplicate takes over: documented
    BOOST_TEST(log.empty());
    BOOST_TEST(probe.had_window(t0));
}

BOOST_FIXTURE_TEST_CASE(a_listener_completed_but_not_durable_opens_the_window, probe_fixture) {
    probe.begin_delivery(0);
    probe.enter(0, t0, "ctx");
    probe.leave(0, true);
    BOOST_TEST(probe.connection_lost(0, [](const claim_key&) { return true; }) == 0u);  // stored already
    BOOST_TEST(probe.connection_lost(0, never_durable) == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_listener_started_after_the_connection_died_is_a_violation, probe_fixture) {
    probe.begin_delivery(0);
    BOOST_TEST(probe.connection_lost(0, never_durable) == 0u);
    probe.enter(0, t0, "ctx");
    BOOST_TEST(kinds(log) == std::vector<std::string>{"listener_after_lost_connection"});
    probe.begin_delivery(0);  // the redelivery has a connection again
    probe.leave(0, true);
    probe.enter(0, t1, "ctx");
    BOOST_TEST(log.all().size() == 1u);
}

BOOST_AUTO_TEST_CASE(the_same_seed_draws_the_same_numbers) {
    sim::random a(42), b(42);
    for (int i = 0; i < 1000; ++i) {
        const std::size_t n = static_cast<std::size_t>(i % 7 + 1);
        const std::size_t x = a.below(n);
        BOOST_TEST(x == b.below(n));
        BOOST_TEST(x < n);
    }
}

BOOST_AUTO_TEST_CASE(drawn_declarations_pass_the_library_validation) {
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        sim::random rng(seed);
        const auto drawn = random_declarations(rng);
        BOOST_TEST(find_problems(drawn.value).empty(), "seed " << seed);
        const auto types = drawn.value.sequences.front().messages.size();
        BOOST_TEST((types >= 2 && types <= 6));
    }
}

BOOST_AUTO_TEST_CASE(a_recorded_run_replays_exactly) {
    for (std::uint64_t seed : {3u, 77u, 741u}) {
        const scenario s = make_scenario(seed);
        random_chooser drawn(scheduler_random(seed), s.fault_percent);
        const run_result first = simulation<claim::insert_first>(s, {}).run(drawn);
        const run_result again = replay<claim::insert_first>(s, first.steps, {});
        BOOST_TEST(again.steps.size() == first.steps.size(), "seed " << seed);
        BOOST_TEST((again.counts == first.counts), "seed " << seed);
        BOOST_TEST(again.violations.size() == first.violations.size(), "seed " << seed);
    }
}
