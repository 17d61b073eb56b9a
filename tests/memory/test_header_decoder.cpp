// The header decoder names one type and one idempotence id per record: repeated headers that
// agree are one header, repeated headers that disagree make the record undecodable (never "the
// first one wins").
#define BOOST_TEST_MODULE header_decoder
#include <boost/test/unit_test.hpp>

#include <string>

#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "support/world.hpp"

using namespace seqinbox;

namespace {

bool names_all(const std::string& text, std::initializer_list<std::string_view> words) {
    for (const auto word : words)
        if (text.find(word) == std::string::npos) return false;
    return true;
}

envelope with_extra_header(std::string name, std::string value) {
    auto e = testing::record("OrderCreated", "c1", "o1");
    e.headers.push_back({std::move(name), std::move(value)});
    return e;
}

/// The bad_message text decoding `e` throws, or "" when it decodes.
std::string decode_problem(const envelope& e) {
    try {
        decoder::header_decoder{}.decode(e);
        return "";
    } catch (const error& x) {
        BOOST_TEST((x.category() == error_category::bad_message));
        return x.what();
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(repeated_headers_with_the_same_value_decode) {
    auto e = with_extra_header("message-type", "OrderCreated");
    e.headers.push_back({"idempotence-id", "c1"});
    const auto d = decoder::header_decoder{}.decode(e);
    BOOST_TEST(d.type == "OrderCreated");
    BOOST_TEST(d.idempotence_id == "c1");
}

BOOST_AUTO_TEST_CASE(two_different_type_headers_are_undecodable_naming_both_values) {
    const auto problem = decode_problem(with_extra_header("message-type", "OrderCancelled"));
    BOOST_TEST(names_all(problem, {"message-type", "'OrderCreated'", "'OrderCancelled'", "orders/0@-1"}), problem);
}

BOOST_AUTO_TEST_CASE(two_different_idempotence_id_headers_are_undecodable_naming_both_values) {
    const auto problem = decode_problem(with_extra_header("idempotence-id", "c2"));
    BOOST_TEST(names_all(problem, {"idempotence-id", "'c1'", "'c2'"}), problem);
}

BOOST_AUTO_TEST_CASE(a_record_with_conflicting_type_headers_goes_to_the_error_sink) {
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    testing::call_log calls;
    memory::inbox inbox(store, source, sink, testing::order_declarations());
    testing::record_all(inbox, calls);

    source.push(with_extra_header("message-type", "OrderShipped"));
    const auto result = inbox.poll_once();
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST((result->outcome == outcome::rejected));
    BOOST_TEST(source.in_flight() == 0u, "acknowledged, not retried");
    BOOST_TEST_REQUIRE(sink.size() == 1u);
    const auto reason = sink.records().front().reason;
    BOOST_TEST(names_all(reason, {"undecodable", "'OrderCreated'", "'OrderShipped'"}), reason);
    BOOST_TEST(calls.size() == 0u);
    BOOST_TEST(store.messages().empty());
}
