// What text a store can keep (seqinbox/store/storable_text.hpp): the UTF-8 check follows
// RFC 3629 (no overlong forms, no surrogates, nothing above U+10FFFF), keys are bounded.
#define BOOST_TEST_MODULE storable_text
#include <boost/test/unit_test.hpp>

#include <string>

#include "seqinbox/store/storable_text.hpp"

using seqinbox::key_problem;
using seqinbox::text_problem;

BOOST_AUTO_TEST_CASE(valid_utf8_of_every_length_is_accepted) {
    for (const std::string s : {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xEF\xBF\xBF", "\xF4\x8F\xBF\xBF",
                                "\xED\x9F\xBF", "'quoted' \\ \"x\""})
        BOOST_TEST(text_problem("id", s).empty(), s);
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_named_with_its_position) {
    const std::string cases[] = {"\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF0\x80\x80\xAF",
                                 "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "ab\xC3", "\xE2\x82", "\xE2\x28\xA1"};
    for (const auto& s : cases) {
        const auto problem = text_problem("idempotence id", s);
        BOOST_TEST(problem.find("is not valid UTF-8 at byte") != std::string::npos, problem);
        BOOST_TEST(problem.starts_with("idempotence id '"), problem);
    }
    BOOST_TEST(text_problem("id", "ab\xC3").ends_with("at byte 2"));
}

BOOST_AUTO_TEST_CASE(nul_bytes_are_named_and_printed_escaped) {
    const auto problem = text_problem("context id", std::string("a\0b", 3));
    BOOST_TEST(problem == "context id 'a\\x00b' contains a NUL byte at byte 1");
}

BOOST_AUTO_TEST_CASE(keys_are_bounded_and_long_values_are_shortened_in_messages) {
    BOOST_TEST(key_problem("id", std::string(seqinbox::max_key_bytes, 'x')).empty());
    const auto problem = key_problem("id", std::string(1 << 20, 'x'));
    BOOST_TEST(problem.find("is 1048576 bytes long; at most 1024 are allowed") != std::string::npos, problem);
    BOOST_TEST(problem.size() < 200u);
    BOOST_TEST(!key_problem("id", "\xFF").empty());
}

BOOST_AUTO_TEST_CASE(a_message_is_storable_when_its_key_and_record_are) {
    seqinbox::message_record row{1, 1, "order.created", "id-1", seqinbox::message_state::waiting, {}, {}, std::nullopt};
    BOOST_TEST(seqinbox::storage_problem(row).empty());
    row.payload = seqinbox::envelope{};
    row.payload->topic = "orders";
    row.payload->headers.push_back({"traceparent", std::string("\0\xFF", 2)});  // values are bytes
    BOOST_TEST(seqinbox::storage_problem(row).empty());
}

BOOST_AUTO_TEST_CASE(the_first_problem_is_named_keys_before_the_record) {
    seqinbox::message_record row{1, 1, "order.created", std::string("a\0b", 3), seqinbox::message_state::waiting, {}, {}, seqinbox::envelope{}};
    row.payload->cluster = "\xFF";
    BOOST_TEST(seqinbox::storage_problem(row) == "idempotence id 'a\\x00b' contains a NUL byte at byte 1");
    row.idempotence_id = "id-1";
    BOOST_TEST(seqinbox::storage_problem(row) == "cluster '\\xFF' is not valid UTF-8 at byte 0");
    row.payload->cluster.clear();
    row.payload->headers.push_back({"bad\xC3", "v"});
    BOOST_TEST(seqinbox::storage_problem(row).starts_with("header name 'bad"), seqinbox::storage_problem(row));
    row.payload.reset();
    BOOST_TEST(seqinbox::storage_problem(row).empty());  // without a record only the key counts
}

BOOST_AUTO_TEST_CASE(claim_keys_are_bounded_like_every_key) {
    BOOST_TEST(seqinbox::claim_key_problem("t", "id").empty());
    BOOST_TEST(seqinbox::claim_key_problem(std::string(2000, 't'), "id").starts_with("message type '"));
    BOOST_TEST(seqinbox::first_problem({"", "second", "third"}) == "second");
}
