// The Prometheus sink and registry: the text exposition format 0.0.4, parsed back by a small
// parser below, after a scripted workload through a real inbox, under concurrency and misuse.
#define BOOST_TEST_MODULE metrics_prometheus
#include <boost/test/unit_test.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/metrics/prometheus.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "support/world.hpp"

using namespace seqinbox;
using metrics::prometheus_metrics;
using metrics::registry;

namespace {

using label_map = std::map<std::string, std::string>;

struct sample {
    std::string name;
    label_map labels;
    double value;
};

/// A parsed exposition. Throws std::runtime_error on any line the text format does not allow.
struct exposition {
    std::map<std::string, std::string> help;  ///< family -> unescaped HELP text
    std::map<std::string, std::string> type;  ///< family -> TYPE
    std::map<std::string, int> header_lines;  ///< family -> how many HELP and TYPE lines
    std::vector<std::string> families;        ///< in the order their TYPE lines came
    std::vector<sample> samples;

    /// The value of one sample; fails the test when it is absent.
    double value(const std::string& name, const label_map& l = {}) const {
        for (const auto& s : samples)
            if (s.name == name && s.labels == l) return s.value;
        BOOST_FAIL("no sample " + name + " with the given labels");
        return 0;
    }
    bool has(const std::string& name, const label_map& l = {}) const {
        return std::ranges::any_of(samples, [&](const sample& s) { return s.name == name && s.labels == l; });
    }
    std::vector<sample> of(const std::string& name) const {
        std::vector<sample> found;
        for (const auto& s : samples)
            if (s.name == name) found.push_back(s);
        return found;
    }
};

class parser {
public:
    explicit parser(std::string_view text) : text_(text) {}

    exposition parse() {
        if (!text_.empty() && !text_.ends_with('\n')) fail("text does not end with a newline");
        while (!text_.empty()) {
            const auto end = text_.find('\n');
            line_ = text_.substr(0, end);
            text_.remove_prefix(end + 1);
            parse_line();
        }
        return std::move(result_);
    }

private:
    [[noreturn]] void fail(const std::string& why) const { throw std::runtime_error(why + " in line '" + std::string(line_) + "'"); }

    void parse_line() {
        if (line_.starts_with("# HELP "))
            parse_header(7, result_.help, true);
        else if (line_.starts_with("# TYPE "))
            parse_header(7, result_.type, false);
        else
            parse_sample();
    }

    void parse_header(std::size_t prefix, std::map<std::string, std::string>& into, bool is_help) {
        std::string_view rest = line_.substr(prefix);
        const auto space = rest.find(' ');
        if (space == std::string_view::npos) fail("header without text");
        const std::string family(rest.substr(0, space));
        std::string_view text = rest.substr(space + 1);
        into[family] = is_help ? unescape_until(text, '\0') : std::string(text);
        ++result_.header_lines[family];
        if (!is_help) result_.families.push_back(family);
    }

    void parse_sample() {
        std::string_view rest = line_;
        const auto name_end = rest.find_first_of("{ ");
        if (name_end == std::string_view::npos) fail("sample without value");
        sample s{std::string(rest.substr(0, name_end)), {}, 0};
        rest.remove_prefix(name_end);
        if (rest.front() == '{') s.labels = parse_labels(rest);
        if (!rest.starts_with(' ')) fail("no space before the value");
        s.value = parse_number(rest.substr(1));
        if (!result_.type.contains(family_of(s.name))) fail("sample before its family's TYPE line");
        result_.samples.push_back(std::move(s));
    }

    label_map parse_labels(std::string_view& rest) {
        label_map found;
        rest.remove_prefix(1);  // '{'
        while (!rest.starts_with('}')) {
            const auto eq = rest.find("=\"");
            if (eq == std::string_view::npos) fail("label without =\"");
            const std::string name(rest.substr(0, eq));
            rest.remove_prefix(eq + 2);
            if (!found.emplace(name, unescape_until(rest, '"')).second) fail("label repeated");
            if (rest.starts_with(',')) rest.remove_prefix(1);
        }
        rest.remove_prefix(1);  // '}'
        return found;
    }

    /// Unescapes up to the unescaped `stop` (consumed) or, for '\0', to the end.
    std::string unescape_until(std::string_view& rest, char stop) {
        std::string out;
        while (!rest.empty() && rest.front() != stop) {
            char c = rest.front();
            rest.remove_prefix(1);
            if (c == '\\') {
                if (rest.empty()) fail("dangling backslash");
                c = rest.front() == 'n' ? '\n' : rest.front();
                if (c != '\n' && c != '\\' && !(c == '"' && stop == '"')) fail("unknown escape");  // HELP keeps '"'
                rest.remove_prefix(1);
            }
            out += c;
        }
        if (stop != '\0') {
            if (rest.empty()) fail("unterminated label value");
            rest.remove_prefix(1);
        }
        return out;
    }

    double parse_number(std::string_view text) const {
        if (text == "+Inf") return std::numeric_limits<double>::infinity();
        if (text == "-Inf") return -std::numeric_limits<double>::infinity();
        if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
        double value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc{} || end != text.data() + text.size()) fail("not a number");
        return value;
    }

    /// A histogram's samples belong to the family without the _bucket/_sum/_count suffix.
    std::string family_of(const std::string& sample_name) const {
        for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
            if (!sample_name.ends_with(suffix)) continue;
            std::string base = sample_name.substr(0, sample_name.size() - suffix.size());
            auto it = result_.type.find(base);
            if (it != result_.type.end() && it->second == "histogram") return base;
        }
        return sample_name;
    }

    std::string_view text_;
    std::string_view line_;
    exposition result_;
};

/// Also fails on text that is not UTF-8: Prometheus then rejects the whole scrape.
exposition parse(const std::string& text) {
    if (const auto problem = text_problem("the exposition", text); !problem.empty()) throw std::runtime_error(problem);
    return parser(text).parse();
}

/// Every series of a histogram: buckets cumulative, ascending `le`, +Inf last and equal to _count.
void check_histogram(const exposition& e, const std::string& family) {
    BOOST_TEST(e.type.at(family) == "histogram");
    for (const auto& count : e.of(family + "_count")) {
        std::vector<sample> buckets;
        for (const auto& b : e.of(family + "_bucket")) {
            label_map without_le = b.labels;
            without_le.erase("le");
            if (without_le == count.labels) buckets.push_back(b);
        }
        BOOST_TEST_REQUIRE(!buckets.empty());
        BOOST_TEST(buckets.back().labels.at("le") == "+Inf");
        BOOST_TEST(buckets.back().value == count.value);
        for (std::size_t i = 1; i < buckets.size(); ++i) {
            BOOST_TEST(buckets[i].value >= buckets[i - 1].value);
            if (i + 1 < buckets.size()) BOOST_TEST(std::stod(buckets[i].labels.at("le")) > std::stod(buckets[i - 1].labels.at("le")));
        }
        BOOST_TEST(e.has(family + "_sum", count.labels));
    }
}

label_map of_type(const std::string& type) { return {{"type", type}}; }

struct prometheus_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using metrics = prometheus_metrics;
};
using prometheus_inbox = memory::basic_inbox<prometheus_policies>;

/// An order inbox whose OrderExpedited listener throws; time moves only when told.
struct world {
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    clock::manual_clock clock;
    std::shared_ptr<registry> shared = std::make_shared<registry>();
    prometheus_inbox inbox{store, source, sink, testing::order_declarations(), {.clock = clock, .metrics = prometheus_metrics(shared)}};

    world() {
        for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderShipped"})
            inbox.on(type, [](const testing::message&, const prometheus_inbox::context&) {});
        inbox.on("OrderExpedited", [](const testing::message&, const prometheus_inbox::context&) {
            throw std::runtime_error("warehouse down");
        });
    }

    outcome deliver(const std::string& type, const std::string& id, const std::string& context) {
        return inbox.deliver(testing::record(type, id, context)).outcome;
    }
};

}  // namespace

static_assert(metrics_policy<prometheus_metrics>);

BOOST_AUTO_TEST_CASE(a_scripted_workload_through_a_real_inbox_is_counted_per_type) {
    world w;
    // o1: Shipped waits 90 s for its predecessors. o2: Validated waits 2 s for Created.
    BOOST_TEST((w.deliver("OrderShipped", "s1", "o1") == outcome::buffered));
    w.clock.advance(std::chrono::seconds(88));
    BOOST_TEST((w.deliver("OrderValidated", "v2", "o2") == outcome::buffered));
    w.clock.advance(std::chrono::seconds(2));
    BOOST_TEST((w.deliver("OrderCreated", "c2", "o2") == outcome::processed));
    BOOST_TEST((w.deliver("OrderCreated", "c1", "o1") == outcome::processed));
    BOOST_TEST((w.deliver("OrderValidated", "v1", "o1") == outcome::processed));
    BOOST_TEST((w.deliver("OrderPrepared", "p1", "o1") == outcome::processed));  // releases Shipped
    BOOST_TEST((w.deliver("OrderCreated", "c1", "o1") == outcome::duplicate));
    BOOST_TEST((w.deliver("OrderExpedited", "e1", "o1") == outcome::failed));

    const auto e = parse(w.shared->render());
    const std::map<std::string, std::map<std::string, double>> expected = {
        {"seqinbox_consumed_messages_total", {{"OrderCreated", 2}, {"OrderValidated", 2}, {"OrderPrepared", 1}, {"OrderShipped", 1}}},
        {"seqinbox_buffered_messages_total", {{"OrderShipped", 1}, {"OrderValidated", 1}}},
        {"seqinbox_released_messages_total", {{"OrderShipped", 1}, {"OrderValidated", 1}}},
        {"seqinbox_duplicate_deliveries_total", {{"OrderCreated", 1}}},
        {"seqinbox_failed_messages_total", {{"OrderExpedited", 1}}},
        {"seqinbox_release_wait_seconds_count", {{"OrderShipped", 1}, {"OrderValidated", 1}}},
        {"seqinbox_release_wait_seconds_sum", {{"OrderShipped", 90}, {"OrderValidated", 2}}},
        {"seqinbox_handle_seconds_count",
         {{"OrderCreated", 3}, {"OrderValidated", 2}, {"OrderPrepared", 1}, {"OrderShipped", 1}, {"OrderExpedited", 1}}},
    };
    for (const auto& [name, per_type] : expected) {
        BOOST_TEST_CONTEXT(name) {
            BOOST_TEST(e.of(name).size() == per_type.size());  // no series for other types
            for (const auto& [type, value] : per_type) BOOST_TEST(e.value(name, of_type(type)) == value);
        }
    }
    // 90 s lies in (60, 300]; 2 s in (1, 10].
    BOOST_TEST(e.value("seqinbox_release_wait_seconds_bucket", {{"type", "OrderShipped"}, {"le", "60"}}) == 0);
    BOOST_TEST(e.value("seqinbox_release_wait_seconds_bucket", {{"type", "OrderShipped"}, {"le", "300"}}) == 1);
    BOOST_TEST(e.value("seqinbox_release_wait_seconds_bucket", {{"type", "OrderValidated"}, {"le", "1"}}) == 0);
    BOOST_TEST(e.value("seqinbox_release_wait_seconds_bucket", {{"type", "OrderValidated"}, {"le", "10"}}) == 1);
    check_histogram(e, "seqinbox_release_wait_seconds");
    check_histogram(e, "seqinbox_handle_seconds");
    BOOST_TEST(e.type.at("seqinbox_consumed_messages_total") == "counter");
}

BOOST_AUTO_TEST_CASE(operations_gauges_pending_actions_and_housekeeping_are_exported) {
    using namespace std::chrono_literals;
    world w;
    BOOST_TEST((w.deliver("OrderShipped", "s1", "o1") == outcome::buffered));
    BOOST_TEST((w.deliver("OrderValidated", "v2", "o2") == outcome::buffered));
    prometheus_metrics sink = w.inbox.metrics();  // a handle on the same registry
    auto gauges = [&] {
        sink.refresh(w.store, w.clock.now());
        return parse(w.shared->render());
    };
    auto e = gauges();
    BOOST_TEST(e.value("seqinbox_waiting_messages", of_type("OrderShipped")) == 1);
    BOOST_TEST(e.value("seqinbox_waiting_messages", of_type("OrderValidated")) == 1);
    BOOST_TEST(e.value("seqinbox_expiring_instances", {{"sequence", "OrderSequence"}}) == 0);
    BOOST_TEST(e.type.at("seqinbox_waiting_messages") == "gauge");

    const auto s1 = w.store.messages_with_key({"OrderShipped", "s1"}).at(0).id;
    BOOST_TEST(seqinbox::accepted(w.store.request_message_action(s1, message_action::expire, w.clock.now())));
    BOOST_TEST(w.inbox.run_pending_actions() == 1u);
    w.clock.advance(19h);  // past 0.75 of the 24 h retention
    e = gauges();
    BOOST_TEST(e.value("seqinbox_waiting_messages", of_type("OrderShipped")) == 0);
    BOOST_TEST(e.value("seqinbox_expiring_instances", {{"sequence", "OrderSequence"}}) == 2);
    BOOST_TEST(e.value("seqinbox_expired_instances", {{"sequence", "OrderSequence"}}) == 0);
    BOOST_TEST(e.value("seqinbox_pending_action_seconds_count") == 1);
    w.clock.advance(6h);
    BOOST_TEST(gauges().value("seqinbox_expired_instances", {{"sequence", "OrderSequence"}}) == 2);

    housekeeping_options options;
    options.removal_delay = 0s;  // marked and removed in one run
    basic_housekeeper<memory::store, memory::error_sink, clock::manual_clock> housekeeper(w.store, w.sink, options, w.clock);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.expired_removed == 2u);
    BOOST_TEST(report.forwarded == 1u);  // v2; s1 was expired by the operator
    sink.housekeeping(report);
    e = gauges();
    BOOST_TEST(e.value("seqinbox_housekeeping_deleted_instances_total", {{"job", "removal"}}) == 2);
    BOOST_TEST(e.value("seqinbox_housekeeping_deleted_instances_total", {{"job", "closed_cleanup"}}) == 0);
    BOOST_TEST(e.value("seqinbox_housekeeping_job_seconds_count", {{"job", "expiry_marking"}}) == 1);
    BOOST_TEST(e.value("seqinbox_waiting_messages", of_type("OrderValidated")) == 0);  // gone, not stale
    BOOST_TEST(e.value("seqinbox_expired_instances", {{"sequence", "OrderSequence"}}) == 0);
    check_histogram(e, "seqinbox_housekeeping_job_seconds");
}

BOOST_AUTO_TEST_CASE(help_and_type_come_once_per_family_and_families_are_ordered_by_name) {
    world w;
    w.deliver("OrderCreated", "c1", "o1");
    w.deliver("OrderShipped", "s1", "o2");
    const auto e = parse(w.shared->render());
    // consumed, buffered, handle, and pending_action (without labels: its one series exists from
    // the start); the others have no series yet
    BOOST_TEST(e.families.size() == 4u);
    BOOST_TEST(std::ranges::is_sorted(e.families));
    for (const auto& family : e.families) {
        BOOST_TEST_CONTEXT(family) {
            BOOST_TEST(e.header_lines.at(family) == 2);
            BOOST_TEST(!e.help.at(family).empty());
        }
    }
}

BOOST_AUTO_TEST_CASE(the_text_is_exactly_the_exposition_format_in_label_order) {
    registry r;
    auto& requests = r.counter("app_requests_total", "Requests.", {"method", "code"});
    requests.inc({"post", "500"});
    requests.inc({"get", "200"}, 2);
    requests.inc({"get", "200"});
    r.gauge("app_queue", "Queue length.").set({}, 7);
    r.histogram("app_seconds", "Latency.", {}, {0.5, 1}).observe({}, 0.5);
    BOOST_TEST(r.render() ==
               "# HELP app_queue Queue length.\n"
               "# TYPE app_queue gauge\n"
               "app_queue 7\n"
               "# HELP app_requests_total Requests.\n"
               "# TYPE app_requests_total counter\n"
               "app_requests_total{method=\"get\",code=\"200\"} 3\n"
               "app_requests_total{method=\"post\",code=\"500\"} 1\n"
               "# HELP app_seconds Latency.\n"
               "# TYPE app_seconds histogram\n"
               "app_seconds_bucket{le=\"0.5\"} 1\n"
               "app_seconds_bucket{le=\"1\"} 1\n"
               "app_seconds_bucket{le=\"+Inf\"} 1\n"
               "app_seconds_sum 0.5\n"
               "app_seconds_count 1\n");
}

BOOST_AUTO_TEST_CASE(label_values_and_help_are_escaped_and_parse_back) {
    const std::string odd_type = "Odd\"Type\\with\nnewline";
    prometheus_metrics sink;
    sink.consumed(odd_type);
    sink.handled(odd_type, std::chrono::milliseconds(3));
    auto& r = *sink.shared_registry();
    r.counter("app_escaped_total", "Backslash \\ and\nnewline, \"quotes\" kept.").inc({});
    const std::string text = r.render();
    BOOST_TEST(text.find(R"(type="Odd\"Type\\with\nnewline")") != std::string::npos);
    BOOST_TEST(text.find(R"(# HELP app_escaped_total Backslash \\ and\nnewline, "quotes" kept.)") != std::string::npos);
    const auto e = parse(text);
    BOOST_TEST(e.value("seqinbox_consumed_messages_total", of_type(odd_type)) == 1);
    BOOST_TEST(e.value("seqinbox_handle_seconds_count", of_type(odd_type)) == 1);
    BOOST_TEST(e.help.at("app_escaped_total") == "Backslash \\ and\nnewline, \"quotes\" kept.");
    check_histogram(e, "seqinbox_handle_seconds");
}

BOOST_AUTO_TEST_CASE(label_values_that_are_not_utf8_render_as_replacement_characters) {
    registry r;
    auto& total = r.counter("app_total", "Bytes \xFF kept out.", {"type"});
    total.inc({"A\xFF\xC3(\xED\xA0\x80\"B"});
    total.inc({"A\xFE\xC3(\xED\xA0\x80\"B"});  // the same once repaired: one series, not two alike
    BOOST_TEST(r.render() ==
               "# HELP app_total Bytes \uFFFD kept out.\n"
               "# TYPE app_total counter\n"
               "app_total{type=\"A\uFFFD\uFFFD(\uFFFD\uFFFD\uFFFD\\\"B\"} 2\n");
    BOOST_TEST(parse(r.render()).value("app_total", of_type("A\uFFFD\uFFFD(\uFFFD\uFFFD\uFFFD\"B")) == 2);
}

namespace {

/// `size` random bytes, every byte value possible: a message type as anyone may send it.
std::string random_bytes(std::mt19937& random, std::size_t size) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::string text(size, ' ');
    for (auto& c : text) c = static_cast<char>(byte(random));
    return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rejected_deliveries_are_labelled_by_why_so_untrusted_types_make_no_series) {
    world w;
    std::mt19937 random(17);
    for (int i = 0; i < 2000; ++i)
        BOOST_TEST_REQUIRE((w.deliver(random_bytes(random, 1024), "r" + std::to_string(i), "o1") == outcome::rejected));
    BOOST_TEST((w.deliver("Order\"Created\\\n", "q1", "o1") == outcome::rejected));
    BOOST_TEST((w.deliver("OrderCreated", std::string(2000, 'x'), "o1") == outcome::rejected));  // id too long to store
    BOOST_TEST((w.deliver("OrderCreated", "c1", "o\xFF") == outcome::rejected));                 // context id not UTF-8
    envelope without_type = testing::record("OrderCreated", "c1", "o1");
    without_type.headers.erase(without_type.headers.begin());
    BOOST_TEST((w.inbox.deliver(without_type).outcome == outcome::rejected));
    BOOST_TEST((w.deliver("OrderCreated", "c1", "o1") == outcome::processed));

    const std::string text = w.shared->render();
    BOOST_TEST_MESSAGE("exposition after 2,004 rejected deliveries: " << text.size() << " bytes");
    exposition e;
    BOOST_REQUIRE_NO_THROW(e = parse(text));
    const std::set<std::string> allowed = {"OrderCreated", "unknown_type", "unstorable", "undecodable"};
    for (const auto& s : e.samples)
        if (s.labels.contains("type")) BOOST_TEST(allowed.contains(s.labels.at("type")), s.name << " labelled " << s.labels.at("type"));
    BOOST_TEST(e.of("seqinbox_failed_messages_total").size() == 3u);
    BOOST_TEST(e.value("seqinbox_failed_messages_total", of_type("unknown_type")) == 2001);
    BOOST_TEST(e.value("seqinbox_failed_messages_total", of_type("unstorable")) == 2);
    BOOST_TEST(e.value("seqinbox_failed_messages_total", of_type("undecodable")) == 1);
    BOOST_TEST(e.value("seqinbox_handle_seconds_count", of_type("unknown_type")) == 2001);
    BOOST_TEST(e.value("seqinbox_handle_seconds_count", of_type("OrderCreated")) == 1);
    BOOST_TEST(text.size() < 16'000u, "the exposition does not grow with the records' types");
    check_histogram(e, "seqinbox_handle_seconds");
}

BOOST_AUTO_TEST_CASE(updates_from_eight_threads_sum_exactly_while_rendering) {
    constexpr int threads = 8;
    constexpr int rounds = 5000;
    prometheus_metrics sink;
    auto& depth = sink.shared_registry()->gauge("app_depth", "Depth.", {"type"});
    std::atomic<bool> done{false};
    std::thread scraper([&] {
        while (!done.load()) parse(sink.shared_registry()->render());  // throws if torn
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([copy = sink, &depth, t]() mutable {  // a copy feeds the same registry
            const std::string own = "T" + std::to_string(t);
            for (int i = 0; i < rounds; ++i) {
                copy.consumed("Shared");
                copy.released(own, std::chrono::milliseconds(i % 3));
                depth.add({"Shared"}, 1);
                if (i % 2 == 0) depth.add({"Shared"}, -1);
            }
        });
    }
    for (auto& w : workers) w.join();
    done = true;
    scraper.join();

    double wait_sum = 0;  // each thread's series sees the same additions in the same order
    for (int i = 0; i < rounds; ++i) wait_sum += std::chrono::duration<double>(std::chrono::milliseconds(i % 3)).count();
    const auto e = parse(sink.shared_registry()->render());
    BOOST_TEST(e.value("seqinbox_consumed_messages_total", of_type("Shared")) == threads * rounds);
    BOOST_TEST(e.value("app_depth", of_type("Shared")) == threads * rounds / 2);
    for (int t = 0; t < threads; ++t) {
        const auto own = of_type("T" + std::to_string(t));
        BOOST_TEST(e.value("seqinbox_released_messages_total", own) == rounds);
        BOOST_TEST(e.value("seqinbox_release_wait_seconds_count", own) == rounds);
        BOOST_TEST(e.value("seqinbox_release_wait_seconds_sum", own) == wait_sum);
    }
    check_histogram(e, "seqinbox_release_wait_seconds");
}

BOOST_AUTO_TEST_CASE(an_empty_registry_and_families_without_series_render_nothing) {
    registry r;
    BOOST_TEST(r.render().empty());
    r.gauge("app_waiting", "Waiting.", {"type"});
    BOOST_TEST(r.render().empty());
    // Without labels a family has its one series from the start, so a scrape sees zero.
    r.counter("app_deleted_total", "Deleted.");
    BOOST_TEST(r.render() == "# HELP app_deleted_total Deleted.\n# TYPE app_deleted_total counter\napp_deleted_total 0\n");
}

BOOST_AUTO_TEST_CASE(numbers_are_written_so_that_they_parse_back_exactly) {
    registry r;
    auto& g = r.gauge("app_value", "Values.", {"case"});
    const std::map<std::string, double> values = {{"tenth", 0.1 + 0.2},      {"tiny", 1e-9},
                                                  {"huge", 1e21},            {"big_integer", 9007199254740993.0},
                                                  {"negative", -2.5},        {"infinite", std::numeric_limits<double>::infinity()},
                                                  {"minus_infinite", -std::numeric_limits<double>::infinity()}};
    for (const auto& [name, value] : values) g.set({name}, value);
    g.set({"nan"}, std::nan(""));
    const std::string text = r.render();
    BOOST_TEST(text.find("app_value{case=\"infinite\"} +Inf\n") != std::string::npos);
    BOOST_TEST(text.find("app_value{case=\"nan\"} NaN\n") != std::string::npos);
    const auto e = parse(text);
    for (const auto& [name, value] : values) BOOST_TEST(e.value("app_value", {{"case", name}}) == value);
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_configurable_and_inclusive) {
    auto shared = std::make_shared<registry>();
    metrics::prometheus_options options;
    options.handle_buckets = {0.01, 0.1};
    prometheus_metrics sink(shared, options);
    sink.handled("A", std::chrono::milliseconds(10));  // on the bound: counted in le="0.01"
    sink.handled("A", std::chrono::milliseconds(50));
    sink.handled("A", std::chrono::seconds(2));
    const auto e = parse(shared->render());
    BOOST_TEST(e.of("seqinbox_handle_seconds_bucket").size() == 3u);
    BOOST_TEST(e.value("seqinbox_handle_seconds_bucket", {{"type", "A"}, {"le", "0.01"}}) == 1);
    BOOST_TEST(e.value("seqinbox_handle_seconds_bucket", {{"type", "A"}, {"le", "0.1"}}) == 2);
    BOOST_TEST(e.value("seqinbox_handle_seconds_bucket", {{"type", "A"}, {"le", "+Inf"}}) == 3);
    BOOST_TEST(e.value("seqinbox_handle_seconds_sum", of_type("A")) == 2.06, boost::test_tools::tolerance(1e-12));
    // Release waits keep their long default buckets, up to a week.
    sink.released("A", std::chrono::hours(30));
    BOOST_TEST(parse(shared->render()).value("seqinbox_release_wait_seconds_bucket", {{"type", "A"}, {"le", "259200"}}) == 1);
}

BOOST_AUTO_TEST_CASE(two_sinks_on_one_registry_share_its_families) {
    auto shared = std::make_shared<registry>();
    prometheus_metrics first(shared);
    prometheus_metrics second(shared);
    first.duplicate("A");
    second.duplicate("A");
    BOOST_TEST(parse(shared->render()).value("seqinbox_duplicate_deliveries_total", of_type("A")) == 2);
    BOOST_TEST(&shared->counter("seqinbox_duplicate_deliveries_total", "other help", {"type"}) ==
               &shared->counter("seqinbox_duplicate_deliveries_total", "", {"type"}));
    metrics::prometheus_options other_buckets;
    other_buckets.handle_buckets = {1, 2};
    BOOST_CHECK_THROW(prometheus_metrics(shared, other_buckets), seqinbox::error);
}

BOOST_AUTO_TEST_CASE(misuse_is_an_error_naming_the_metric) {
    registry r;
    auto& c = r.counter("app_total", "Total.", {"type"});
    auto misuse_text = [](auto&& call) -> std::string {
        try {
            call();
        } catch (const seqinbox::error& e) {
            BOOST_TEST((e.category() == error_category::misuse));
            return e.what();
        }
        BOOST_FAIL("expected a misuse error");
        return {};
    };
    BOOST_TEST(misuse_text([&] { c.inc({}); }).find("app_total") != std::string::npos);
    BOOST_TEST(misuse_text([&] { c.inc({"A", "B"}); }).find("takes 1 label values, got 2") != std::string::npos);
    BOOST_TEST(misuse_text([&] { c.inc({"A"}, -1); }).find("cannot decrease") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.gauge("app_total", "Total.", {"type"}); }).find("already registered") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.counter("app_total", "Total.", {"kind"}); }).find("already registered") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.counter("1bad", "Bad."); }).find("'1bad'") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.counter("app_ok_total", "Bad.", {"bad-label"}); }).find("'bad-label'") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.counter("app_ok_total", "Bad.", {"__reserved"}); }).find("'__reserved'") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.histogram("app_h", "H.", {"le"}); }).find("'le'") != std::string::npos);
    BOOST_TEST(misuse_text([&] { r.histogram("app_h", "H.", {}, {1, 1}); }).find("strictly increasing") != std::string::npos);
    BOOST_TEST(r.render() == "");  // nothing half-registered
}
