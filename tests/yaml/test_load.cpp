// One valid declaration file per feature, loaded and checked field by field.
#define BOOST_TEST_MODULE yaml_load
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

#include "fixture.hpp"
#include "seqinbox/declare/problems.hpp"
#include "seqinbox/error.hpp"

using namespace yaml_test;
using namespace std::chrono_literals;
using seqinbox::condition;
using seqinbox::envelope;

namespace {

seqinbox::declarations<message> load(const std::string& name) {
    return seqinbox::yaml::load_file(valid_file(name), app_registry());
}

std::string render(const condition& c) { return seqinbox::describe(c); }

}  // namespace

BOOST_AUTO_TEST_CASE(subtypes_across_sequences) {
    const auto d = load("subtypes_across_sequences");
    BOOST_TEST_REQUIRE(d.sequences.size() == 2u);
    const auto& orders = d.sequences[0];
    BOOST_TEST(orders.name == "OrderSequence");
    BOOST_TEST(orders.retention.count() == std::chrono::seconds(24h).count());
    BOOST_TEST_REQUIRE(orders.messages.size() == 2u);
    BOOST_TEST(orders.messages[0].type == "OrderCreated");
    BOOST_TEST(orders.messages[0].subtype == "");
    BOOST_TEST(orders.messages[0].release.is_always());
    BOOST_TEST(orders.messages[0].context_id("42", envelope{}).value() == "order-42");
    BOOST_TEST(orders.messages[1].qualified_type() == "OrderValidated.STOCK_AVAILABLE");
    BOOST_TEST(render(orders.messages[1].release) == "after OrderCreated");
    const auto& returns = d.sequences[1];
    BOOST_TEST(returns.name == "ReturnSequence");
    BOOST_TEST(returns.retention.count() == std::chrono::seconds(24h * 7).count());
    BOOST_TEST(returns.messages[1].qualified_type() == "OrderValidated.STOCK_MISSING");
    envelope keyed;
    keyed.key = "r-7";
    BOOST_TEST(returns.messages[0].context_id("", keyed).value() == "r-7");  // built-in `key`
    BOOST_TEST_REQUIRE(d.resolvers.size() == 1u);
    const auto& resolver = d.resolvers.at("OrderValidated");
    BOOST_TEST(resolver.resolve("STOCK_MISSING now", envelope{}) == "STOCK_MISSING");
    BOOST_TEST((resolver.subtypes == std::vector<std::string>{"STOCK_AVAILABLE", "STOCK_MISSING"}));
}

BOOST_AUTO_TEST_CASE(two_sequences_with_filter_and_builtins) {
    const auto d = load("two_sequences");
    BOOST_TEST_REQUIRE(d.sequences.size() == 2u);
    const auto& orders = d.sequences[0];
    BOOST_TEST(orders.retention.count() == 30 * 60);
    BOOST_TEST(orders.messages[0].filter("skip me", envelope{}) == false);
    BOOST_TEST(orders.messages[0].filter("keep me", envelope{}) == true);
    BOOST_TEST(!orders.messages[1].filter);  // no messageFilter: everything is sequenced
    envelope json;
    json.value = R"({"order": {"id": "o-9", "lines": [1, 2]}})";
    BOOST_TEST(orders.messages[1].context_id("", json).value() == "o-9");
    json.value = R"({"order": {}})";
    BOOST_TEST(!orders.messages[1].context_id("", json).has_value());
    const auto& invoices = d.sequences[1];
    BOOST_TEST(invoices.name == "InvoiceSequence");
    BOOST_TEST(invoices.retention.count() == 5400);
    BOOST_TEST(invoices.messages[0].context_id("", with_header("invoice-id", "inv-1")).value() == "inv-1");
    BOOST_TEST(!invoices.messages[0].context_id("", with_header("other", "x")).has_value());
    BOOST_TEST(render(invoices.messages[1].release) == "after InvoiceIssued");
    BOOST_TEST(d.resolvers.empty());
}

BOOST_AUTO_TEST_CASE(complex_nested_conditions) {
    const auto d = load("nested_conditions");
    BOOST_TEST_REQUIRE(d.sequences.size() == 1u);
    const auto& m = d.sequences[0].messages;
    BOOST_TEST_REQUIRE(m.size() == 4u);
    BOOST_TEST(d.sequences[0].retention.count() == 7 * 24 * 3600);
    BOOST_TEST(render(m[3].release) == "all_of(after A, any_of(after B, all_of(after C, any_of(after A, after B))))");
    const auto processed = [](std::vector<std::string> done) {
        return [done](const std::string& t) { return std::ranges::find(done, t) != done.end(); };
    };
    BOOST_TEST(!m[3].release.satisfied(processed({"A"})));
    BOOST_TEST(m[3].release.satisfied(processed({"A", "B"})));
    BOOST_TEST(m[3].release.satisfied(processed({"A", "C"})));  // A, then C with (A or B)
    BOOST_TEST(!m[3].release.satisfied(processed({"B", "C"})));
}

BOOST_AUTO_TEST_CASE(or_alternatives_with_a_harmless_cycle) {
    const auto d = load("or_with_harmless_cycle");
    const auto& m = d.sequences[0].messages;
    BOOST_TEST_REQUIRE(m.size() == 3u);
    BOOST_TEST(d.sequences[0].retention.count() == 90);
    BOOST_TEST(render(m[1].release) == "any_of(after Start, after Y)");
    BOOST_TEST(render(m[2].release) == "after X");
    BOOST_TEST(seqinbox::find_problems(d).empty());
}

BOOST_AUTO_TEST_CASE(topics_and_clusters) {
    const auto d = load("topics_and_clusters");
    const auto& m = d.sequences[0].messages;
    BOOST_TEST_REQUIRE(m.size() == 3u);
    BOOST_TEST(m[0].topic == "orders");
    BOOST_TEST(m[0].cluster == "main");
    for (std::size_t i : {1u, 2u}) {
        BOOST_TEST(m[i].topic == "payments");
        BOOST_TEST(m[i].cluster == "finance");
    }
    BOOST_TEST(m[1].qualified_type() == "Payment.CARD");
    BOOST_TEST(m[2].qualified_type() == "Payment.INVOICE");
    // A built-in resolver returns the header, and can return exactly the declared subtypes.
    const auto& resolver = d.resolvers.at("Payment");
    BOOST_TEST(resolver.resolve("", with_header("payment-kind", "CARD")) == "CARD");
    BOOST_TEST(resolver.resolve("", envelope{}) == "");  // missing header: no declared subtype
    BOOST_TEST((resolver.subtypes == std::vector<std::string>{"CARD", "INVOICE"}));
}

BOOST_AUTO_TEST_CASE(recording_until_is_an_instant_with_its_offset) {
    const auto d = load("recording_until");
    BOOST_TEST_REQUIRE(d.sequences.size() == 2u);
    BOOST_TEST_REQUIRE(d.sequences[0].recording_until.has_value());
    // 01:30:00.5 at +01:30 is midnight and half a second UTC.
    const auto expected = std::chrono::sys_days(std::chrono::year(2026) / 12 / 1) + 500ms;
    BOOST_TEST((*d.sequences[0].recording_until == expected));
    BOOST_TEST(!d.sequences[1].recording_until.has_value());  // absent: no recording mode
}

BOOST_AUTO_TEST_CASE(missing_context_id_policy_as_declared_else_the_loader_default) {
    using seqinbox::missing_context_id_policy;
    const auto policies = [](const seqinbox::declarations<message>& d) {
        std::vector<missing_context_id_policy> out;
        for (const auto& m : d.sequences.at(0).messages) out.push_back(m.missing_context_id);
        return out;
    };
    const auto library = policies(load("missing_context_id"));
    BOOST_TEST((library == std::vector{missing_context_id_policy::dead_letter, missing_context_id_policy::handle,
                                       missing_context_id_policy::handle}));
    const auto relay = policies(seqinbox::yaml::load_file(valid_file("missing_context_id"), app_registry(),
                                                          {.missing_context_id = missing_context_id_policy::dead_letter}));
    BOOST_TEST((relay == std::vector{missing_context_id_policy::dead_letter, missing_context_id_policy::handle,
                                     missing_context_id_policy::dead_letter}));
    const auto doc = seqinbox::yaml::parse_file(valid_file("missing_context_id"));
    BOOST_TEST((doc.sequences.at(0).messages.at(2).missing_context_id == std::nullopt), "not set: the loader's default");
}

BOOST_AUTO_TEST_CASE(deduplication_window_is_a_period_that_may_be_zero_and_defaults_to_the_retention) {
    const auto d = load("deduplication_window");
    BOOST_TEST_REQUIRE(d.sequences.size() == 3u);
    BOOST_TEST((d.sequences[0].deduplication_window == std::optional<std::chrono::seconds>(7 * 24h)));
    BOOST_TEST((d.sequences[1].kept_closed_for() == 0s));
    BOOST_TEST(!d.sequences[2].deduplication_window.has_value());
    BOOST_TEST((d.sequences[2].kept_closed_for() == 2h));
}

BOOST_AUTO_TEST_CASE(max_waiting_and_overflow_policy_as_declared_else_the_defaults) {
    const auto d = load("bounded_buffer");
    BOOST_TEST_REQUIRE(d.sequences.size() == 2u);
    BOOST_TEST((d.sequences[0].buffer.max_waiting == std::optional<std::size_t>(500)));
    BOOST_TEST((d.sequences[0].buffer.on_overflow == seqinbox::overflow_policy::reject));
    BOOST_TEST(!d.sequences[1].buffer.max_waiting.has_value());
    BOOST_TEST(d.sequences[1].buffer.limit() == seqinbox::default_max_waiting);
    BOOST_TEST((d.sequences[1].buffer.on_overflow == seqinbox::overflow_policy::dead_letter_instance));
}

BOOST_AUTO_TEST_CASE(numbered_sequences_with_their_numbering_as_declared_else_the_defaults) {
    const auto d = load("numbered");
    BOOST_TEST_REQUIRE(d.sequences.size() == 3u);
    const auto& ledger = d.sequences[0];
    BOOST_TEST(ledger.numbered());
    BOOST_TEST((ledger.numbering.first_number == std::optional<std::int64_t>(0)));
    BOOST_TEST((ledger.numbering.gap_timeout == std::optional<std::chrono::seconds>(10min)));
    BOOST_TEST((ledger.numbering.on_gap == seqinbox::gap_policy::skip));
    const auto& telemetry = d.sequences[1];
    BOOST_TEST(telemetry.numbered());
    BOOST_TEST(!telemetry.numbering.first_number.has_value(), "first-seen");
    BOOST_TEST(!telemetry.numbering.gap_timeout.has_value());
    BOOST_TEST((telemetry.numbering.on_gap == seqinbox::gap_policy::hold));
    BOOST_TEST(!d.sequences[2].numbered());
    BOOST_TEST(!d.sequences[2].messages[0].sequence_number);
}

BOOST_AUTO_TEST_CASE(a_sequence_number_is_the_extracted_text_when_it_is_a_whole_non_negative_decimal) {
    const auto d = load("numbered");
    const auto& by_header = d.sequences[0].messages[0].sequence_number;
    const auto& by_json = d.sequences[0].messages[1].sequence_number;
    const auto number = [](const auto& extract, envelope e) { return extract("", e); };
    BOOST_TEST(number(by_header, with_header("seq", "42")).value() == 42);
    BOOST_TEST(number(by_header, with_header("seq", "0")).value() == 0);
    for (const char* bad : {"-1", "+1", " 4", "4 ", "4.0", "1e3", "four", "", "9223372036854775808"})
        BOOST_TEST(!number(by_header, with_header("seq", bad)).has_value(), bad);
    BOOST_TEST(!number(by_header, envelope{}).has_value(), "no header: no number");
    envelope e;
    e.value = R"({"seq": 7})";
    BOOST_TEST(number(by_json, e).value() == 7);
    e.value = R"({"seq": "8"})";
    BOOST_TEST(number(by_json, e).value() == 8, "a JSON string of digits");
    for (const char* bad : {R"({"seq": 1.5})", R"({"seq": -3})", R"({"seq": null})", R"({"other": 1})", "not json"}) {
        e.value = bad;
        BOOST_TEST(!number(by_json, e).has_value(), bad);
    }
}

BOOST_AUTO_TEST_CASE(a_registered_context_id_extractor_can_read_the_sequence_number) {
    auto names = app_registry();
    names.add_extractor("payload", [](const message& m, const envelope&) -> std::optional<std::string> { return m; });
    const auto d = seqinbox::yaml::load_string(
        "sequences:\n"
        "  - name: S\n"
        "    retentionPeriod: 1h\n"
        "    messages:\n"
        "      - type: A\n"
        "        contextIdExtractor: key\n"
        "        sequenceNumber: payload\n",
        "inline.yaml", names);
    const auto& extract = d.sequences.at(0).messages.at(0).sequence_number;
    BOOST_TEST(extract("17", envelope{}).value() == 17);
    BOOST_TEST(!extract("order-17", envelope{}).has_value());
}

BOOST_AUTO_TEST_CASE(load_string_names_the_source_in_errors) {
    try {
        seqinbox::yaml::load_string("sequences: 3\n", "inline.yaml", app_registry());
        BOOST_FAIL("no error");
    } catch (const seqinbox::error& e) {
        BOOST_CHECK(e.category() == seqinbox::error_category::configuration);
        BOOST_TEST_REQUIRE(e.details().size() == 1u);
        BOOST_TEST(e.details()[0] == "inline.yaml:1:12: 'sequences' must be a list, not a scalar");
    }
}

BOOST_AUTO_TEST_CASE(assumed_names_are_listed_and_throw_when_called) {
    const auto r = seqinbox::yaml::bind_names(seqinbox::yaml::parse_file(invalid_file("unknown_extractor")),
                                        seqinbox::yaml::registry<message>{}, {.assume_registered = true});
    BOOST_TEST(r.problems.empty());
    BOOST_TEST_REQUIRE(r.assumed.size() == 1u);
    BOOST_TEST(r.assumed[0].name == "customer-id");
    BOOST_TEST(r.assumed[0].where.line == 6u);
    BOOST_TEST(r.assumed[0].where.column == 29u);
    BOOST_CHECK_THROW(r.decls.sequences[0].messages[0].context_id("", envelope{}), seqinbox::error);
}

BOOST_AUTO_TEST_CASE(registry_rejects_reserved_duplicate_and_empty_names) {
    seqinbox::yaml::registry<message> r;
    const auto id = [](const message& m, const envelope&) -> std::optional<std::string> { return m; };
    BOOST_CHECK_THROW(r.add_extractor("key", id), seqinbox::error);
    BOOST_CHECK_THROW(r.add_extractor("json:/a", id), seqinbox::error);
    BOOST_CHECK_THROW(r.add_extractor("", id), seqinbox::error);
    BOOST_CHECK_THROW(r.add_extractor("empty", {}), seqinbox::error);
    r.add_extractor("id", id);
    BOOST_CHECK_THROW(r.add_extractor("id", id), seqinbox::error);
    BOOST_TEST(r.extractor("id") != nullptr);
    BOOST_TEST(r.extractor("other") == nullptr);
}

BOOST_AUTO_TEST_CASE(unreadable_file_throws) {
    BOOST_CHECK_THROW(seqinbox::yaml::parse_file(files_dir / "does-not-exist.yaml"), seqinbox::error);
    BOOST_CHECK_THROW(seqinbox::yaml::load_file(files_dir / "does-not-exist.yaml", app_registry()), seqinbox::error);
}
