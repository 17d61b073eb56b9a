// Log lines name when they were written: an ISO-8601 UTC timestamp with milliseconds, then the
// level and the message, so that a relay's log can be read against other systems' logs.
#define BOOST_TEST_MODULE stream_logger
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/logger/utc_time.hpp"
#include "support/iso_utc_time.hpp"

using namespace seqinbox;
using namespace std::chrono;

BOOST_AUTO_TEST_CASE(utc_time_is_iso_8601_with_milliseconds) {
    const sys_days day = year(2026) / December / 1;
    BOOST_TEST(logger::utc_time(day + 15h + 40min + 8s + 123ms) == "2026-12-01T15:40:08.123Z");
    BOOST_TEST(logger::utc_time(day + 999us) == "2026-12-01T00:00:00.000Z", "truncated, not rounded");
    BOOST_TEST(logger::utc_time(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
    BOOST_TEST(logger::utc_time(sys_days(year(1969) / December / 31) + 23h + 59min + 59s + 500ms) == "1969-12-31T23:59:59.500Z");
}

BOOST_AUTO_TEST_CASE(a_line_starts_with_the_time_it_was_written) {
    std::ostringstream out;
    const auto before = floor<milliseconds>(system_clock::now());
    logger::stream_logger(out).log(log_level::warn, "relay started");
    const auto after = system_clock::now();

    const std::string line = out.str();
    BOOST_TEST_REQUIRE(seqinbox::test::starts_with_iso_utc_time(line), "line: " << line);
    BOOST_TEST(line.substr(seqinbox::test::iso_utc_time_shape.size()) == " warn relay started\n", "line: " << line);
    auto field = [&](std::size_t at, std::size_t length) { return std::stoi(line.substr(at, length)); };
    const sys_days day = year(field(0, 4)) / field(5, 2) / field(8, 2);
    const auto written = day + hours(field(11, 2)) + minutes(field(14, 2)) + seconds(field(17, 2)) + milliseconds(field(20, 3));
    BOOST_TEST((written >= before && written <= after), "line: " << line);
}

namespace {

/// An unbuffered stream buffer that records each write it is handed, as a file descriptor
/// would receive them from std::cerr (unitbuf: flushed after every output operation).
class recorded_writes : public std::streambuf {
public:
    std::vector<std::string> writes;

protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        writes.emplace_back(s, static_cast<std::size_t>(n));
        return n;
    }
    int_type overflow(int_type c) override {
        if (!traits_type::eq_int_type(c, traits_type::eof())) writes.emplace_back(1, traits_type::to_char_type(c));
        return c;
    }
};

}  // namespace

// The relay logs to stderr, which other writers share (librdkafka's log lines, a wrapper's): a
// line handed over in pieces can be cut by theirs, and costs a write(2) per piece (six per
// decision line: a quarter of the relay's CPU time in bench_relay, under perf).
BOOST_AUTO_TEST_CASE(a_line_reaches_an_unbuffered_stream_in_one_write) {
    recorded_writes buffer;
    std::ostream out(&buffer);
    out.setf(std::ios::unitbuf);
    logger::stream_logger log(out);
    log.log(log_level::info, "processed OrderCreated/v1 o-1");
    log.log(log_level::error, "second line");
    BOOST_TEST_REQUIRE(buffer.writes.size() == 2u);
    BOOST_TEST(buffer.writes[0].ends_with(" info processed OrderCreated/v1 o-1\n"));
    BOOST_TEST(buffer.writes[1].ends_with(" error second line\n"));
}
