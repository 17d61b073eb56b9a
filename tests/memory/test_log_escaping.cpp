// Text from a record (types, ids, context ids, reasons quoting them) reaches log lines escaped:
// one decision is one line of printable ASCII, so a record cannot forge a line of its own.
#define BOOST_TEST_MODULE log_escaping
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "support/iso_utc_time.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using namespace std::chrono_literals;

namespace {

struct logging_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using logger = ::seqinbox::logger::stream_logger;
};
using logging_inbox = memory::basic_inbox<logging_policies>;

/// A complete log line of its own after a newline, then a carriage return, an escape sequence,
/// NEL (U+0085) and LINE SEPARATOR (U+2028): all valid UTF-8, so the store keeps such keys.
const std::string forged = "\n2026-12-01T15:40:08.123Z info processed OrderCreated/forged context o9\r\x1b[2K\u0085\u2028";

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

bool printable_ascii(const std::string& line) {
    return std::ranges::all_of(line, [](char c) { return c >= 0x20 && c < 0x7F; });
}

}  // namespace

BOOST_AUTO_TEST_CASE(record_text_with_newlines_control_characters_and_invalid_utf8_cannot_forge_log_lines) {
    std::ostringstream out;
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    clock::manual_clock clock;
    logging_inbox inbox(store, source, sink, testing::order_declarations(), {.clock = clock, .logger = logger::stream_logger(out)});
    for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderShipped"})
        inbox.on(type, [](const testing::message&, const logging_inbox::context&) {});
    inbox.on("OrderExpedited", [](const testing::message&, const logging_inbox::context&) { throw std::runtime_error("down" + forged); });
    const std::string context = "o1" + forged;

    BOOST_TEST((inbox.deliver(testing::record("OrderShipped", "s1" + forged, context)).outcome == outcome::buffered));
    BOOST_TEST((inbox.deliver(testing::record("OrderCreated", "c1" + forged, context)).outcome == outcome::processed));
    BOOST_TEST((inbox.deliver(testing::record("OrderCreated", "c1" + forged, context)).outcome == outcome::duplicate));
    BOOST_TEST((inbox.deliver(testing::record("Evil" + forged + "\xFF", "x1" + forged + "\xC3", context)).outcome == outcome::rejected));
    BOOST_TEST((inbox.deliver(testing::record("OrderPrepared", "p1" + forged + "\xFF", context)).outcome == outcome::rejected));
    BOOST_TEST((inbox.deliver(testing::record("OrderExpedited", "e1" + forged, context)).outcome == outcome::failed));
    clock.advance(25h);
    housekeeping_options options;
    options.removal_delay = 0s;
    basic_housekeeper<memory::store, memory::error_sink, clock::manual_clock, logger::stream_logger> housekeeper(
        store, sink, options, clock, logger::stream_logger(out));
    BOOST_TEST(housekeeper.run_once().forwarded == 1u);

    const auto lines = lines_of(out.str());
    BOOST_TEST_MESSAGE(out.str());
    // buffered, processed, skipped, rejected twice, failed; EXPIRED and forwarded by housekeeping
    BOOST_TEST(lines.size() == 8u);
    std::size_t processed = 0;
    for (const auto& line : lines) {
        BOOST_TEST_CONTEXT(line) {
            BOOST_TEST(test::starts_with_iso_utc_time(line));
            BOOST_TEST(printable_ascii(line));
            const auto rest = std::string_view(line).substr(test::iso_utc_time_shape.size());
            BOOST_TEST((rest.starts_with(" info ") || rest.starts_with(" warn ")));
            if (rest.starts_with(" info processed ")) ++processed;
        }
    }
    BOOST_TEST(processed == 1u);
    BOOST_TEST(out.str().find("info processed OrderCreated/c1\\x0A2026-12-01T15:40:08.123Z info processed OrderCreated/forged "
                              "context o9\\x0D\\x1B[2K\\xC2\\x85\\xE2\\x80\\xA8 context o1\\x0A") != std::string::npos);
}
