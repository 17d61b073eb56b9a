// Built-in extractors (key, header:NAME, json:/pointer), sequence numbers, retention periods and gap timeouts.
#define BOOST_TEST_MODULE yaml_builtins
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>

#include "seqinbox/yaml/builtin.hpp"
#include "seqinbox/yaml/retention.hpp"

using seqinbox::yaml::json_pointer_value;

namespace {

std::string value_or_none(std::string_view json, std::string_view pointer) {
    return json_pointer_value(json, pointer).value_or("<none>");
}

long long seconds_of(std::string_view text) {
    auto r = seqinbox::yaml::parse_retention(text);
    if (auto* why = std::get_if<std::string>(&r)) BOOST_FAIL(std::string(text) + ": " + *why);
    return std::get<std::chrono::seconds>(r).count();
}

std::string rejection_of(std::string_view text) {
    auto r = seqinbox::yaml::parse_retention(text);
    if (!std::holds_alternative<std::string>(r)) BOOST_FAIL(std::string(text) + " was accepted");
    return std::get<std::string>(r);
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_pointer_strings_numbers_and_literals) {
    const std::string doc = R"( { "id": "o-1", "n": -12.5e3, "ok": true, "no": false, "nil": null,
        "nested": { "list": [ {"x": 1}, {"x": "second"} ] }, "empty": "" } )";
    BOOST_TEST(value_or_none(doc, "/id") == "o-1");
    BOOST_TEST(value_or_none(doc, "/n") == "-12.5e3");
    BOOST_TEST(value_or_none(doc, "/ok") == "true");
    BOOST_TEST(value_or_none(doc, "/no") == "false");
    BOOST_TEST(value_or_none(doc, "/nil") == "<none>");
    BOOST_TEST(value_or_none(doc, "/nested/list/1/x") == "second");
    BOOST_TEST(value_or_none(doc, "/nested/list/0/x") == "1");
    BOOST_TEST(value_or_none(doc, "/empty") == "");
    BOOST_TEST(value_or_none(doc, "/nested") == "<none>");  // objects and arrays are no context id
    BOOST_TEST(value_or_none(doc, "/nested/list") == "<none>");
    BOOST_TEST(value_or_none(doc, "/missing") == "<none>");
    BOOST_TEST(value_or_none(doc, "/nested/list/2") == "<none>");
    BOOST_TEST(value_or_none(doc, "/nested/list/-") == "<none>");
    BOOST_TEST(value_or_none(doc, "/nested/list/01") == "<none>");  // no leading zeros
    BOOST_TEST(value_or_none(doc, "/id/0") == "<none>");
    BOOST_TEST(value_or_none(R"("top")", "") == "top");  // the empty pointer is the whole document
}

BOOST_AUTO_TEST_CASE(json_pointer_escapes) {
    const std::string doc = R"({"a/b": "slash", "m~n": "tilde", "~1": "literal", "": "empty key",
        "esc": "q\" b\\ s\/ \n\t\u00e9\ud83d\ude00", "k\u0065y": "escaped key"})";
    BOOST_TEST(value_or_none(doc, "/a~1b") == "slash");
    BOOST_TEST(value_or_none(doc, "/m~0n") == "tilde");
    BOOST_TEST(value_or_none(doc, "/~01") == "literal");  // ~01 is "~1", not "/"
    BOOST_TEST(value_or_none(doc, "/") == "empty key");
    BOOST_TEST(value_or_none(doc, "/esc") == "q\" b\\ s/ \n\t\xc3\xa9\xf0\x9f\x98\x80");
    BOOST_TEST(value_or_none(doc, "/key") == "escaped key");
}

BOOST_AUTO_TEST_CASE(json_pointer_first_duplicate_member_wins) {
    BOOST_TEST(value_or_none(R"({"a": "first", "a": "second"})", "/a") == "first");
}

BOOST_AUTO_TEST_CASE(json_pointer_on_invalid_json_yields_nothing) {
    for (const char* bad : {"", "{", R"({"id": "x")", R"({"id": "x"} trailing)", R"({"id": 'x'})", R"({"id": "x",})",
                            R"({"id": 01})", R"({"id": "\q"})", R"({"id": "\ud800"})", "{\"id\": \"a\x01\"}",
                            R"({"id": "x" "y": 1})", R"([1, 2,])", R"({"id": tru})", R"({"id": -})", R"({"id": 1.})"})
        BOOST_TEST(value_or_none(bad, "/id") == "<none>", bad);
    std::string deep(600, '[');  // deeper than the reader's limit: invalid, not a crash
    deep += std::string(600, ']');
    BOOST_TEST(value_or_none(deep, "/0") == "<none>");
}

BOOST_AUTO_TEST_CASE(json_pointer_syntax) {
    BOOST_TEST(seqinbox::yaml::json_pointer_problem("/a/b~0~1").empty());
    BOOST_TEST(seqinbox::yaml::json_pointer_problem("").empty());
    BOOST_TEST(!seqinbox::yaml::json_pointer_problem("a").empty());
    BOOST_TEST(!seqinbox::yaml::json_pointer_problem("/a~2").empty());
    BOOST_TEST(!seqinbox::yaml::json_pointer_problem("/a~").empty());
}

BOOST_AUTO_TEST_CASE(builtin_names) {
    using status = seqinbox::yaml::builtin_lookup::status;
    seqinbox::envelope e;
    e.key = "k-1";
    e.value = R"({"order": {"id": 77}})";
    e.headers = {{"h", "first"}, {"h", "second"}};
    BOOST_TEST(seqinbox::yaml::find_builtin("key").read(e).value() == "k-1");
    BOOST_TEST(seqinbox::yaml::find_builtin("header:h").read(e).value() == "first");
    BOOST_TEST(!seqinbox::yaml::find_builtin("header:x").read(e).has_value());
    BOOST_TEST(seqinbox::yaml::find_builtin("json:/order/id").read(e).value() == "77");
    BOOST_TEST((seqinbox::yaml::find_builtin("order-id").state == status::not_builtin));
    BOOST_TEST((seqinbox::yaml::find_builtin("header:").state == status::malformed));
    BOOST_TEST((seqinbox::yaml::find_builtin("json:x").state == status::malformed));
    BOOST_TEST((seqinbox::yaml::find_builtin("Key").state == status::not_builtin));
}

BOOST_AUTO_TEST_CASE(retention_formats) {
    BOOST_TEST(seconds_of("24h") == 86400);
    BOOST_TEST(seconds_of("30m") == 1800);
    BOOST_TEST(seconds_of("90s") == 90);
    BOOST_TEST(seconds_of("7d") == 604800);
    BOOST_TEST(seconds_of("P7D") == 604800);
    BOOST_TEST(seconds_of("PT1H30M") == 5400);
    BOOST_TEST(seconds_of("P1DT12H") == 129600);
    BOOST_TEST(seconds_of("P2W") == 1209600);
    BOOST_TEST(seconds_of("PT45S") == 45);
}

BOOST_AUTO_TEST_CASE(retention_rejections) {
    BOOST_TEST(rejection_of("0h").find("not zero") != std::string::npos);
    BOOST_TEST(rejection_of("PT0S").find("not zero") != std::string::npos);
    BOOST_TEST(rejection_of("-5m").find("must be positive") != std::string::npos);
    BOOST_TEST(rejection_of("-P1D").find("must be positive") != std::string::npos);
    BOOST_TEST(rejection_of("3600").find("has no unit") != std::string::npos);
    BOOST_TEST(rejection_of("P1Y").find("years and months") != std::string::npos);
    BOOST_TEST(rejection_of("99999999999999999999d").find("ten years") != std::string::npos);
    BOOST_TEST(rejection_of("P99999999999999999999D").find("ten years") != std::string::npos);
    for (const char* bad : {"", "h", "24", "24x", "24H", "1h30m", "24 h", "P", "PT", "P1H", "PT1D", "PT1M1H", "P1D1W", "P1DT",
                            "p7d ", "1.5h", "P1.5D"})
        BOOST_TEST(!rejection_of(bad).empty(), bad);
}

BOOST_AUTO_TEST_CASE(sequence_numbers_are_whole_non_negative_decimals_that_fit_an_int64) {
    using seqinbox::yaml::parse_sequence_number;
    BOOST_TEST(parse_sequence_number("0").value() == 0);
    BOOST_TEST(parse_sequence_number("42").value() == 42);
    BOOST_TEST(parse_sequence_number("007").value() == 7);
    BOOST_TEST(parse_sequence_number("9223372036854775807").value() == std::numeric_limits<std::int64_t>::max());
    for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "4x", "x", "9223372036854775808",
                            "99999999999999999999"})
        BOOST_TEST(!parse_sequence_number(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(gap_timeouts_take_the_retention_syntax_and_must_be_positive) {
    const auto seconds = [](std::string_view text) {
        auto r = seqinbox::yaml::parse_gap_timeout(text);
        return std::holds_alternative<std::chrono::seconds>(r) ? std::get<std::chrono::seconds>(r).count() : -1;
    };
    const auto why = [](std::string_view text) {
        auto r = seqinbox::yaml::parse_gap_timeout(text);
        return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string("accepted");
    };
    BOOST_TEST(seconds("10m") == 600);
    BOOST_TEST(seconds("PT1H30M") == 5400);
    BOOST_TEST(why("0s") == "gap timeout '0s' must be positive, not zero");
    BOOST_TEST(why("-1m") == "gap timeout '-1m' must be positive (a sign is not allowed)");
    BOOST_TEST(why("5 minutes").starts_with("malformed gap timeout '5 minutes'; expected e.g. 24h"));
}
