// The engine reports each decision as a structured event (seqinbox/decision.hpp) to the logger
// and the metrics sink: tools read its fields instead of parsing log text. A logger or sink that
// does not take events gets what it got before: the same text lines, the same metric calls.
#define BOOST_TEST_MODULE decision_events
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/decision.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "support/iso_utc_time.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using namespace std::chrono_literals;

namespace {

/// A decision with its own copies of the text.
struct recorded {
    decision_kind kind;
    std::string type, id, context, reason;
    seqinbox::rejection rejection;
    outcome result;
    instance_id instance;
    std::chrono::nanoseconds waited;

    explicit recorded(const decision& e)
        : kind(e.kind), type(e.qualified_type), id(e.idempotence_id), context(e.context_id), reason(e.reason), rejection(e.rejection),
          result(e.result), instance(e.instance), waited(e.waited) {}
};

using event_list = std::vector<recorded>;

/// Copies share the list, as the inbox keeps a copy of its logger.
struct event_logger {
    std::shared_ptr<event_list> events = std::make_shared<event_list>();
    std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();

    bool enabled(log_level) const { return true; }
    void log(log_level, std::string_view text) { lines->emplace_back(text); }
    void decided(const decision& e) { events->emplace_back(e); }
};
static_assert(decision_logger<event_logger>);

/// The calls a metrics sink without `decided` gets, as "call type" lines.
struct call_metrics {
    std::shared_ptr<std::vector<std::string>> calls = std::make_shared<std::vector<std::string>>();

    void consumed(std::string_view) {}
    void handled(std::string_view, std::chrono::nanoseconds) {}
    void buffered(std::string_view t) { add("buffered", t); }
    void released(std::string_view t, std::chrono::nanoseconds waited) {
        add("released", std::string(t) + " after " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) + "s");
    }
    void failed(std::string_view t) { add("failed", t); }
    void duplicate(std::string_view t) { add("duplicate", t); }

private:
    void add(std::string_view call, std::string_view type) { calls->push_back(std::string(call) + " " + std::string(type)); }
};

/// A sink that takes decisions: it gets them instead of the calls they imply.
struct event_metrics : call_metrics {
    std::shared_ptr<event_list> events = std::make_shared<event_list>();
    void decided(const decision& e) { events->emplace_back(e); }
};

template <class Logger, class Metrics>
struct world_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using metrics = Metrics;
    using logger = Logger;
};

template <class Logger, class Metrics = call_metrics>
struct world {
    using inbox_type = memory::basic_inbox<world_policies<Logger, Metrics>>;

    memory::store store;
    memory::source source;
    memory::error_sink sink;
    clock::manual_clock clock;
    Logger logger;
    Metrics metrics;
    std::set<std::string> failing;  ///< idempotence ids whose listener throws
    inbox_type inbox;

    explicit world(Logger l = {}) : logger(std::move(l)), inbox(store, source, sink, testing::order_declarations(), {.clock = clock, .metrics = metrics, .logger = logger}) {
        for (const auto& seq : inbox.declared().sequences)
            for (const auto& m : seq.messages)
                inbox.on(m.qualified_type(), [this](const testing::message&, const typename inbox_type::context& c) {
                    if (failing.contains(c.idempotence_id)) throw std::runtime_error("boom " + c.idempotence_id);
                });
    }

    delivery_result deliver(const std::string& type, const std::string& id, const std::string& context) {
        return inbox.deliver(testing::record(type, id, context));
    }

    /// Delivers a whole order, in order: the instance closes.
    void complete(const std::string& context) {
        for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
            deliver(type, std::string(type) + "-" + context, context);
    }

    /// An operator expires the WAITING message `id`; the pending-action run carries it out.
    void expire(const std::string& id) {
        for (const auto& row : store.messages())
            if (row.idempotence_id == id) BOOST_TEST_REQUIRE(seqinbox::accepted(store.request_message_action(row.id, message_action::expire, clock.now())));
        BOOST_TEST_REQUIRE(inbox.run_pending_actions() == 1u);
    }
};

using event_world = world<event_logger>;

/// The one event of `kind` for `id`; fails the test unless there is exactly one.
const recorded& only(const event_list& events, decision_kind kind, const std::string& id) {
    const recorded* found = nullptr;
    std::size_t n = 0;
    for (const auto& e : events)
        if (e.kind == kind && e.id == id) found = (++n, &e);
    BOOST_TEST_REQUIRE(n == 1u, n << " events " << to_string(kind) << " for '" << id << "'");
    return *found;
}

/// The names an event gives: its message's type, its context, the reason.
void names(const recorded& e, std::string_view type, std::string_view context, std::string_view reason = {}) {
    BOOST_TEST(e.type == type);
    BOOST_TEST(e.context == context);
    BOOST_TEST(e.reason == reason);
}

std::vector<decision_kind> kinds(const event_list& events) {
    std::vector<decision_kind> k;
    for (const auto& e : events) k.push_back(e.kind);
    return k;
}

}  // namespace

BOOST_AUTO_TEST_CASE(buffered_processed_and_released_events_name_the_message_and_its_context) {
    event_world w;
    w.deliver("OrderValidated", "v1", "o1");
    w.clock.advance(5s);
    w.deliver("OrderCreated", "c1", "o1");

    const auto& events = *w.logger.events;
    BOOST_TEST((kinds(events) == std::vector{decision_kind::buffered, decision_kind::processed, decision_kind::released}));
    names(only(events, decision_kind::buffered, "v1"), "OrderValidated", "o1");
    names(only(events, decision_kind::processed, "c1"), "OrderCreated", "o1");
    const auto& released = only(events, decision_kind::released, "v1");
    names(released, "OrderValidated", "o1");
    BOOST_TEST((released.waited == 5s));
    BOOST_TEST(w.logger.lines->empty(), "decisions reach a decision logger as events only");
}

BOOST_AUTO_TEST_CASE(a_duplicate_event_says_why_it_was_skipped) {
    event_world w;
    w.deliver("OrderCreated", "c1", "o1");
    BOOST_TEST((w.deliver("OrderCreated", "c1", "o1").outcome == outcome::duplicate));
    names(only(*w.logger.events, decision_kind::duplicate, "c1"), "OrderCreated", "o1", "already claimed");
}

BOOST_AUTO_TEST_CASE(failed_and_release_failed_events_quote_the_listener) {
    event_world w;
    w.failing = {"e1", "p1"};
    w.deliver("OrderPrepared", "p1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    BOOST_TEST((w.deliver("OrderExpedited", "e1", "o1").outcome == outcome::failed));

    names(only(*w.logger.events, decision_kind::release_failed, "p1"), "OrderPrepared", "o1", "listener failed: boom p1");
    names(only(*w.logger.events, decision_kind::failed, "e1"), "OrderExpedited", "o1", "listener failed: boom e1");
}

BOOST_AUTO_TEST_CASE(a_rejected_event_names_the_kind_of_rejection) {
    event_world w;
    BOOST_TEST((w.deliver("Evil", "x1", "o1").outcome == outcome::rejected));
    const auto& rejected = only(*w.logger.events, decision_kind::rejected, "x1");
    names(rejected, "Evil", "", "unknown message type 'Evil'");  // not classified, so no context id
    BOOST_TEST((rejected.rejection == rejection::unknown_type));
}

BOOST_AUTO_TEST_CASE(a_not_sequenced_event_says_whether_the_listener_failed) {
    event_world w;
    w.failing = {"n2"};
    BOOST_TEST((w.deliver("OrderCreated", "n1", "").outcome == outcome::not_sequenced));
    BOOST_TEST((w.deliver("OrderCreated", "n2", "").outcome == outcome::failed));
    BOOST_TEST((only(*w.logger.events, decision_kind::not_sequenced, "n1").result == outcome::not_sequenced));
    const auto& failed = only(*w.logger.events, decision_kind::not_sequenced, "n2");
    names(failed, "OrderCreated", "");
    BOOST_TEST((failed.result == outcome::failed));
}

BOOST_AUTO_TEST_CASE(a_closed_event_names_the_instance_and_its_context) {
    event_world w;
    w.complete("o2");
    const auto instances = w.store.instances();
    BOOST_TEST_REQUIRE(instances.size() == 1u);
    const auto& closed = only(*w.logger.events, decision_kind::closed, "");
    names(closed, "", "o2");
    BOOST_TEST(closed.instance == instances[0].id);
    BOOST_TEST((w.logger.events->back().kind == decision_kind::closed));
}

BOOST_AUTO_TEST_CASE(an_expired_event_names_the_message_an_operator_expired) {
    event_world w;
    w.deliver("OrderValidated", "v3", "o3");
    w.expire("v3");
    names(only(*w.logger.events, decision_kind::expired, "v3"), "OrderValidated", "o3");
}

/// Every kind of decision through a text logger: the lines are those the engine always wrote.
BOOST_AUTO_TEST_CASE(a_text_logger_gets_each_decision_as_its_line) {
    std::ostringstream out;
    world<logger::stream_logger> w{logger::stream_logger(out)};
    const auto instance_o2 = [&] {
        w.complete("o2");
        return w.store.instances().at(0).id;
    }();
    w.failing = {"e1", "p1", "n2"};
    w.deliver("OrderPrepared", "p1", "o1");
    w.deliver("OrderValidated", "v1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderExpedited", "e1", "o1");
    w.deliver("Evil", "x1", "o1");
    w.deliver("OrderCreated", "n1", "");
    w.deliver("OrderCreated", "n2", "");
    w.deliver("OrderValidated", "v3", "o3");
    w.expire("v3");

    std::vector<std::string> lines;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);) {
        BOOST_TEST_REQUIRE(test::starts_with_iso_utc_time(line), line);
        lines.push_back(line.substr(test::iso_utc_time_shape.size() + 1));
    }
    std::vector<std::string> expected;
    for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
        expected.push_back("info processed " + std::string(type) + "/" + type + "-o2 context o2");
    expected.push_back("info closed instance " + std::to_string(instance_o2) + " context o2");
    for (const char* line : {
             "info buffered OrderPrepared/p1 context o1",
             "info buffered OrderValidated/v1 context o1",
             "info processed OrderCreated/c1 context o1",
             "warn release failed OrderPrepared/p1 context o1: listener failed: boom p1",
             "info released OrderValidated/v1 context o1",
             "info skipped duplicate OrderCreated/c1 context o1 (already claimed)",
             "warn failed OrderExpedited/e1 context o1: listener failed: boom e1",
             "warn rejected Evil/x1: unknown message type 'Evil'",
             "info not sequenced OrderCreated/n1 -> not_sequenced",
             "info not sequenced OrderCreated/n2 -> failed",
             "info buffered OrderValidated/v3 context o3",
             "warn expired OrderValidated/v3 context o3 by an operator: not replayed",
         })
        expected.emplace_back(line);
    BOOST_TEST(lines == expected, boost::test_tools::per_element());
}

/// The same decisions through a sink without `decided`: the calls it always got.
BOOST_AUTO_TEST_CASE(a_metrics_sink_gets_the_calls_each_decision_implies) {
    world<event_logger> w;
    w.failing = {"e1", "p1"};
    w.deliver("OrderPrepared", "p1", "o1");
    w.deliver("OrderValidated", "v1", "o1");
    w.clock.advance(7s);
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderExpedited", "e1", "o1");
    w.deliver("Evil", "x1", "o1");
    w.deliver("OrderCreated", "n1", "");
    const auto& calls = *w.inbox.metrics().calls;
    BOOST_TEST(calls == (std::vector<std::string>{"buffered OrderPrepared", "buffered OrderValidated", "failed OrderPrepared",
                                                   "released OrderValidated after 7s", "duplicate OrderCreated", "failed OrderExpedited",
                                                   "failed unknown_type"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_metrics_sink_that_takes_decisions_gets_the_events_instead_of_the_calls) {
    world<event_logger, event_metrics> w;
    w.deliver("OrderValidated", "v1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderCreated", "c1", "o1");
    const auto& sink = w.inbox.metrics();
    BOOST_TEST(sink.calls->empty());
    BOOST_TEST((kinds(*sink.events) == std::vector{decision_kind::buffered, decision_kind::processed, decision_kind::released,
                                                   decision_kind::duplicate}));
    BOOST_TEST((kinds(*sink.events) == kinds(*w.logger.events)), "the logger and the sink hear the same decisions");
}
