// One minimal model per policy concept, checked at compile time, and the provided policies
// checked against the same concepts. Non-models are checked too, so the concepts can fail.
#define BOOST_TEST_MODULE policy_models
#include <boost/test/unit_test.hpp>

#include "seqinbox/claim.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/propagation.hpp"

using namespace seqinbox;

namespace models {

/// Source: hands out deliveries and hears when each is durable.
struct source {
    std::optional<envelope> poll() { return std::nullopt; }
    void acknowledge(const envelope&) {}
};

/// Error sink: returns only once the failure is stored.
struct sink {
    std::vector<failed_delivery> kept;
    void publish(const failed_delivery& f) { kept.push_back(f); }
};

/// Decoder: the message is the payload length; type and id come from the key.
struct decoder {
    using message_type = std::size_t;
    decoded<std::size_t> decode(const envelope& e) const { return {e.key.value(), e.key.value(), e.value.value_or("").size()}; }
};

/// Clock: a fixed instant.
struct clock {
    timestamp now() const { return timestamp{}; }
};

/// Logger: keeps only warnings and errors.
struct logger {
    std::vector<std::string> lines;
    bool enabled(log_level l) const { return l >= log_level::warn; }
    void log(log_level, std::string_view m) { lines.emplace_back(m); }
};

/// The policy bundle: the models above, with the listener in a transaction of its own.
struct policies : default_policies {
    using propagation = ::seqinbox::propagation::requires_new;
    using decoder = models::decoder;
    using clock = models::clock;
    using logger = models::logger;
};

}  // namespace models

static_assert(source_policy<models::source>);
static_assert(error_sink_policy<models::sink>);
static_assert(decoder_policy<models::decoder>);
static_assert(seqinbox::clock_policy<models::clock>);
static_assert(logger_policy<models::logger>);
static_assert(metrics_policy<metrics::null_metrics>);

static_assert(seqinbox::store_policy<memory::store>);
static_assert(claim_policy<claim::insert_first, memory::store::transaction>);
static_assert(claim_policy<claim::check_then_insert, memory::store::transaction>);
static_assert(propagation_policy<propagation::required, memory::store>);
static_assert(propagation_policy<propagation::requires_new, memory::store>);
static_assert(propagation_policy<propagation::not_supported, memory::store>);
static_assert(seqinbox::clock_policy<clock::manual_clock> && seqinbox::clock_policy<clock::system_clock>);
static_assert(logger_policy<logger::stream_logger> && logger_policy<logger::null_logger>);

static_assert(!source_policy<models::sink>);
static_assert(!error_sink_policy<models::source>);
static_assert(!seqinbox::store_policy<models::source>);
static_assert(!claim_policy<models::clock, memory::store::transaction>);
static_assert(!decoder_policy<models::clock>);

BOOST_AUTO_TEST_CASE(an_inbox_runs_on_user_models_of_every_policy) {
    auto by_key = [](const std::size_t&, const envelope& e) { return std::optional(e.key); };
    declarations<std::size_t> decls;
    decls.sequences.push_back({"S", std::chrono::hours(1), {{.type = "A", .context_id = by_key}}});
    memory::store store;
    models::source source;
    models::sink sink;
    seqinbox::basic_inbox<memory::store, models::source, models::sink, models::policies> inbox(store, source, sink, decls);
    std::size_t seen = 0;
    inbox.on("A", [&](const std::size_t& length, const auto& ctx) {
        BOOST_TEST(ctx.transaction != nullptr);  // requires_new hands the listener a transaction
        seen = length;
    });
    BOOST_TEST((inbox.deliver(envelope{.key = "A", .value = "four"}).outcome == outcome::processed));
    BOOST_TEST(seen == 4u);
    BOOST_TEST((inbox.deliver(envelope{.key = "B", .value = "x"}).outcome == outcome::rejected));
    BOOST_TEST(sink.kept.size() == 1u);
    BOOST_TEST(sink.kept.at(0).reason.find("'B'") != std::string::npos);
}
