// Numbered sequences as an operator sees them: the gap-timeout decision's fields and warning line,
// seqinbox_gap_timeouts_total per sequence and policy, and the missing numbers of a view. What
// every store must do is in tests/conformance/numbered_behaviour.hpp.
#define BOOST_TEST_MODULE numbered_gaps
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/declare/example.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/metrics/prometheus.hpp"
#include "support/world.hpp"

using namespace seqinbox;

namespace {

struct gap_event {
    std::string context, sequence, reason;
    instance_id instance;
    gap_policy policy;
};

/// Keeps the gap decisions and every warning line; copies share them.
struct gap_logger {
    std::shared_ptr<std::vector<gap_event>> gaps = std::make_shared<std::vector<gap_event>>();
    std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();

    bool enabled(log_level) const { return true; }
    void log(log_level level, std::string_view text) {
        if (level == log_level::warn) warnings->emplace_back(text);
    }
    void decided(const decision& e) {
        if (logger::level_of(e) == log_level::warn) warnings->push_back(logger::text_of(e));
        if (e.kind == decision_kind::gap_timed_out)
            gaps->push_back({std::string(e.context_id), std::string(e.sequence), std::string(e.reason), e.instance, e.gap});
    }
};

struct gap_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using metrics = ::seqinbox::metrics::prometheus_metrics;
    using logger = gap_logger;
};
using gap_inbox = memory::basic_inbox<gap_policies>;

declarations<testing::message> ledger(gap_policy policy) {
    auto decls = example::ledger_declarations<testing::message>();
    decls.sequences.front().numbering.gap_timeout = std::chrono::minutes(5);
    decls.sequences.front().numbering.on_gap = policy;
    return decls;
}

struct world {
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    clock::manual_clock clock;
    gap_logger logger;
    std::shared_ptr<metrics::registry> shared = std::make_shared<metrics::registry>();
    gap_inbox inbox;

    explicit world(declarations<testing::message> decls)
        : inbox(store, source, sink, std::move(decls), {.clock = clock, .metrics = metrics::prometheus_metrics(shared), .logger = logger}) {
        for (const auto& seq : inbox.declared().sequences)
            for (const auto& m : seq.messages) inbox.on(m.qualified_type(), [](const testing::message&, const gap_inbox::context&) {});
    }

    outcome deliver(const std::string& id, const std::string& context, std::int64_t number) {
        envelope e = testing::record("LedgerEntry", id, context);
        e.headers.push_back({"seq", std::to_string(number)});
        return inbox.deliver(e).outcome;
    }

    bool rendered(const std::string& line) const { return shared->render().find(line) != std::string::npos; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_timed_out_gap_is_a_warning_with_its_missing_numbers) {
    world w(ledger(gap_policy::skip));
    w.deliver("e1", "acct-7", 1);
    w.deliver("e5", "acct-7", 5);
    w.clock.advance(std::chrono::minutes(6));
    BOOST_TEST(w.inbox.run_gap_timeouts() == 1u);
    BOOST_TEST_REQUIRE(w.logger.gaps->size() == 1u);
    const gap_event& e = w.logger.gaps->front();
    BOOST_TEST(e.context == "acct-7");
    BOOST_TEST(e.sequence == "LedgerSequence");
    BOOST_TEST((e.policy == gap_policy::skip));
    BOOST_TEST(e.instance == w.store.instances().front().id);
    BOOST_TEST(e.reason == "numbers 2 to 4 missing for longer than the gap timeout of 300 s (gap policy skip)");
    const auto& warnings = *w.logger.warnings;
    const bool warned = std::ranges::any_of(warnings, [](const std::string& l) {
        return l.starts_with("gap timed out: numbers 2 to 4 missing") && l.ends_with("of LedgerSequence context acct-7; skip");
    });
    BOOST_TEST(warned, (warnings.empty() ? std::string() : warnings.back()));
    BOOST_TEST(w.rendered("seqinbox_gap_timeouts_total{sequence=\"LedgerSequence\",policy=\"skip\"} 1\n"));
}

BOOST_AUTO_TEST_CASE(each_gap_timeout_is_counted_per_sequence_and_policy) {
    world skip(ledger(gap_policy::skip)), dead(ledger(gap_policy::dead_letter)), hold(ledger(gap_policy::hold));
    for (world* w : {&skip, &dead, &hold}) {
        w->deliver("a3", "a", 3);
        w->deliver("b2", "b", 2);
        w->clock.advance(std::chrono::minutes(6));
        BOOST_TEST(w->inbox.run_gap_timeouts() == 2u);
        w->inbox.run_gap_timeouts();  // only a held gap is still there
    }
    BOOST_TEST(skip.rendered("seqinbox_gap_timeouts_total{sequence=\"LedgerSequence\",policy=\"skip\"} 2\n"));
    BOOST_TEST(dead.rendered("seqinbox_gap_timeouts_total{sequence=\"LedgerSequence\",policy=\"dead-letter\"} 2\n"));
    BOOST_TEST(hold.rendered("seqinbox_gap_timeouts_total{sequence=\"LedgerSequence\",policy=\"hold\"} 4\n"));
    BOOST_TEST(dead.sink.size() == 2u);
    BOOST_TEST((dead.sink.records().front().kind == failure_kind::gap_timeout));
    BOOST_TEST(skip.sink.size() + hold.sink.size() == 0u);
}

// Held gaps stay stalled: each run goes on where the last stopped, so every one is reached and
// reported; a run that finds nothing more ends the round, and the next starts from the first.
BOOST_AUTO_TEST_CASE(gap_timeout_runs_go_on_where_the_last_stopped) {
    world w(ledger(gap_policy::hold));
    for (const char* context : {"a", "b", "c"}) w.deliver(std::string(context) + "3", context, 3);
    w.clock.advance(std::chrono::minutes(6));
    for (int run = 0; run < 3; ++run) BOOST_TEST(w.inbox.run_gap_timeouts(1, 1) == 1u);
    BOOST_TEST(w.inbox.run_gap_timeouts(1, 1) == 0u, "past the last: the next run starts from the first");
    BOOST_TEST(w.inbox.run_gap_timeouts(1, 1) == 1u);
    std::string contexts;
    for (const auto& e : *w.logger.gaps) contexts += e.context;
    BOOST_TEST(contexts == "abca");
}

BOOST_AUTO_TEST_CASE(missing_numbers_start_after_the_last_released_or_at_the_declared_first) {
    const numbered_progress fresh{std::nullopt, {3, 4, 8}};
    using range = std::pair<std::int64_t, std::int64_t>;
    BOOST_TEST((missing_numbers(fresh, 1) == std::vector<range>{{1, 2}, {5, 7}}));
    BOOST_TEST((missing_numbers(fresh) == std::vector<range>{{5, 7}}), "no first number known: the gaps between waiting ones");
    BOOST_TEST((missing_numbers(fresh, 1, 1) == std::vector<range>{{1, 2}}), "at most `limit`");
    BOOST_TEST(missing_numbers({5, {}}, 1).empty());
    BOOST_TEST((missing_numbers({5, {7}}) == std::vector<range>{{6, 6}}));
}
