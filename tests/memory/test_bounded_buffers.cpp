// Bounded buffers as an operator sees them: the default limit and its warning, the overflow
// decision's fields, and seqinbox_buffer_overflows_total per sequence and policy. What every
// store must do is in tests/conformance/buffer_behaviour.hpp.
#define BOOST_TEST_MODULE bounded_buffers
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/metrics/prometheus.hpp"
#include "support/world.hpp"

using namespace seqinbox;

namespace {

struct overflow_event {
    std::string type, id, context, sequence, reason;
    instance_id instance;
    overflow_policy policy;
};

/// Keeps the overflow decisions and every warning line; copies share them.
struct overflow_logger {
    std::shared_ptr<std::vector<overflow_event>> overflows = std::make_shared<std::vector<overflow_event>>();
    std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();

    bool enabled(log_level) const { return true; }
    void log(log_level level, std::string_view text) {
        if (level == log_level::warn) warnings->emplace_back(text);
    }
    void decided(const decision& e) {
        if (logger::level_of(e) == log_level::warn) warnings->push_back(logger::text_of(e));
        if (e.kind == decision_kind::overflowed)
            overflows->push_back({std::string(e.qualified_type), std::string(e.idempotence_id), std::string(e.context_id),
                                  std::string(e.sequence), std::string(e.reason), e.instance, e.overflow});
    }
};

struct buffer_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using metrics = ::seqinbox::metrics::prometheus_metrics;
    using logger = overflow_logger;
};
using buffer_inbox = memory::basic_inbox<buffer_policies>;

declarations<testing::message> orders(std::optional<std::size_t> max_waiting, overflow_policy policy) {
    auto decls = testing::order_declarations();
    decls.sequences.front().buffer = {max_waiting, policy};
    return decls;
}

struct world {
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    clock::manual_clock clock;
    overflow_logger logger;
    std::shared_ptr<metrics::registry> shared = std::make_shared<metrics::registry>();
    buffer_inbox inbox;

    explicit world(declarations<testing::message> decls)
        : inbox(store, source, sink, std::move(decls), {.clock = clock, .metrics = metrics::prometheus_metrics(shared), .logger = logger}) {
        for (const auto& seq : inbox.declared().sequences)
            for (const auto& m : seq.messages) inbox.on(m.qualified_type(), [](const testing::message&, const buffer_inbox::context&) {});
    }

    outcome deliver(const std::string& type, const std::string& id, const std::string& context) {
        return inbox.deliver(testing::record(type, id, context)).outcome;
    }

    bool rendered(const std::string& line) const { return shared->render().find(line) != std::string::npos; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(without_a_declared_limit_ten_thousand_wait_and_the_warning_names_the_default) {
    world w(orders(std::nullopt, overflow_policy::dead_letter_newest));
    for (std::size_t i = 0; i < default_max_waiting; ++i)
        BOOST_TEST_REQUIRE((w.deliver("OrderValidated", "v" + std::to_string(i), "o1") == outcome::buffered));
    BOOST_TEST(w.logger.overflows->empty());
    BOOST_TEST((w.deliver("OrderValidated", "one-more", "o1") == outcome::failed));
    BOOST_TEST_REQUIRE(w.logger.overflows->size() == 1u);
    const overflow_event& e = w.logger.overflows->front();
    BOOST_TEST(e.id == "one-more");
    BOOST_TEST(e.context == "o1");
    BOOST_TEST(e.sequence == "OrderSequence");
    BOOST_TEST((e.policy == overflow_policy::dead_letter_newest));
    BOOST_TEST(e.instance == w.store.instances().front().id);
    BOOST_TEST(e.reason.find("maxWaiting 10000, the default: declare maxWaiting to choose") != std::string::npos, e.reason);
    const auto& warnings = *w.logger.warnings;
    BOOST_TEST(std::ranges::any_of(warnings, [](const std::string& l) { return l.starts_with("buffer full: OrderValidated/one-more"); }));
    BOOST_TEST(w.rendered("seqinbox_buffer_overflows_total{sequence=\"OrderSequence\",policy=\"dead-letter-newest\"} 1\n"));
    BOOST_TEST_REQUIRE(w.sink.size() == 1u);
    BOOST_TEST((w.sink.records().front().kind == failure_kind::buffer_overflow));
}

BOOST_AUTO_TEST_CASE(each_overflow_is_counted_per_sequence_and_policy) {
    world newest(orders(1, overflow_policy::dead_letter_newest));
    world instance(orders(1, overflow_policy::dead_letter_instance));
    world reject(orders(1, overflow_policy::reject));
    for (world* w : {&newest, &instance, &reject}) {
        BOOST_TEST_REQUIRE((w->deliver("OrderValidated", "v1", "o1") == outcome::buffered));
        for (const char* id : {"v2", "v3"}) {
            try {
                w->deliver("OrderValidated", id, "o1");
            } catch (const error& e) {
                BOOST_TEST((e.category() == error_category::retryable));
            }
        }
    }
    // newest: v2 and v3 overflow; instance: v2 takes v1 along, then v3 finds room; reject: v2 and v3.
    BOOST_TEST(newest.rendered("seqinbox_buffer_overflows_total{sequence=\"OrderSequence\",policy=\"dead-letter-newest\"} 2\n"));
    BOOST_TEST(instance.rendered("seqinbox_buffer_overflows_total{sequence=\"OrderSequence\",policy=\"dead-letter-instance\"} 1\n"));
    BOOST_TEST(reject.rendered("seqinbox_buffer_overflows_total{sequence=\"OrderSequence\",policy=\"reject\"} 2\n"));
    BOOST_TEST(newest.sink.size() == 2u);
    BOOST_TEST(instance.sink.size() == 2u);
    BOOST_TEST(reject.sink.size() == 0u);
    BOOST_TEST(newest.rendered("seqinbox_failed_messages_total{type=\"OrderValidated\"} 2\n"));
}
