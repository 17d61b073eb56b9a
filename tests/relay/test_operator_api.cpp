// The operator HTTP API (docs/operator-api.md) over the in-memory store, through a real endpoint
// and socket: every endpoint, and every refusal (no token, a bad token, the view token on a
// write, writes disabled, a request not addressed to loopback, unknown ids and paths, bad
// bodies and parameters, oversize and chunked requests, wrong methods); and the tokens' rules.
#define BOOST_TEST_MODULE seqinbox operator api
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "conformance/harness.hpp"
#include "memory/memory_backend.hpp"
#include "relay/http_client.hpp"
#include "seqinbox/declare/example.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/relay/http_endpoint.hpp"
#include "seqinbox/relay/operator_api.hpp"

namespace si = seqinbox;
namespace conf = seqinbox::conformance;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string view_token = "view-0123456789abcdef";
const std::string write_token = "write-0123456789abcdef";

si::relay::access_tokens both_tokens() { return {view_token, write_token}; }

/// An inbox on the memory store, and the API over that store on a free loopback port.
struct api_fixture {
    explicit api_fixture(si::relay::access_tokens tokens = both_tokens(), conf::hook<conf::harness<conf::memory_backend>::inbox_type> hook = {},
                         si::declarations<conf::message> decls = si::testing::order_declarations(),
                         si::relay::detail::declared_numbering numbering = {})
        : h(b, std::move(hook), std::move(decls)),
          api(b.store, si::relay::http_access(std::move(tokens), {}),
              {.expiring_share = 0.75, .now = [clock = b.clock] { return clock.now(); }, .numbering = std::move(numbering)}),
          endpoint({}, {}, [this](const si::relay::http_request& r) { return api(r); }) {}

    si::test::http_reply call(const std::string& method, const std::string& path, const std::string& token = {}, const std::string& body = {},
                              std::vector<std::string> headers = {}) {
        if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
        return si::test::http_call(endpoint.port(), method, path, headers, body);
    }
    json get(const std::string& path, int status = 200) {
        const auto reply = call("GET", path, view_token);
        BOOST_TEST(reply.status == status, path << ": " << reply.body);
        return json::parse(reply.body, nullptr, false);
    }
    si::test::http_reply post(const std::string& path, const std::string& body, const std::string& token = write_token) {
        return call("POST", path, token, body);
    }

    conf::memory_backend b;
    conf::harness<conf::memory_backend> h;
    si::relay::operator_api<si::memory::store> api;
    si::relay::http_endpoint endpoint;
};

/// The {"error": ...} of a reply, which every refusal has.
std::string error_of(const si::test::http_reply& reply) {
    const auto body = json::parse(reply.body, nullptr, false);
    BOOST_TEST_REQUIRE(body.is_object(), reply.body);
    BOOST_TEST_REQUIRE(body.contains("error"), reply.body);
    return body["error"].get<std::string>();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void expect_refusal(const si::test::http_reply& reply, int status, const std::string& part) {
    BOOST_TEST(reply.status == status, reply.head << "\n" << reply.body);
    BOOST_TEST(contains(error_of(reply), part), error_of(reply));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(views)

BOOST_AUTO_TEST_CASE(the_console_is_served_at_the_root_without_a_token) {
    api_fixture f;
    const auto page = f.call("GET", "/");
    BOOST_TEST(page.status == 200);
    BOOST_TEST(contains(page.head, "Content-Type: text/html"));
    BOOST_TEST(contains(page.body, "seqinbox console"));
    BOOST_TEST(contains(page.body, "/api/v1"));
    expect_refusal(f.call("POST", "/", "", "{}"), 405, "GET");
}

BOOST_AUTO_TEST_CASE(whoami_names_the_role_of_the_token) {
    api_fixture f;
    BOOST_TEST(f.get("/api/v1/whoami")["role"] == "view");
    const auto write = json::parse(f.call("GET", "/api/v1/whoami", write_token).body);
    BOOST_TEST(write["role"] == "write");
    BOOST_TEST(write["writes_enabled"] == true);
    BOOST_TEST(write["views_open"] == false);
}

BOOST_AUTO_TEST_CASE(counts_per_state_and_type) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto counts = f.get("/api/v1/counts");
    BOOST_TEST_REQUIRE(counts["instances"].size() == 1u);
    BOOST_TEST(counts["instances"][0] == (json{{"sequence", "OrderSequence"}, {"state", "OPEN"}, {"count", 1}}));
    BOOST_TEST(counts["messages"].size() == 3u);
    BOOST_TEST(counts["messages"][0]["state"] == "WAITING");
}

BOOST_AUTO_TEST_CASE(an_instance_by_id_and_by_sequence_and_context_id_with_its_messages) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto id = conf::instance_id_of(f.b, "o1");
    f.b.clock.advance(90s);
    const auto view = f.get("/api/v1/instances/" + std::to_string(id));
    BOOST_TEST(view["instance"]["context_id"] == "o1");
    BOOST_TEST(view["instance"]["state"] == "OPEN");
    BOOST_TEST(view["instance"]["age_seconds"].get<double>() == 90.0);
    BOOST_TEST(view["pending_action"].is_null());
    BOOST_TEST_REQUIRE(view["messages"].size() == 3u);
    BOOST_TEST(view["messages"][0]["type"] == "OrderValidated");
    BOOST_TEST(view["messages"][0]["state"] == "WAITING");
    BOOST_TEST(view["messages"][0]["pending_action"].is_null());
    BOOST_TEST(view["messages"][0]["created_at"].get<std::string>().ends_with("Z"));
    BOOST_TEST(f.get("/api/v1/instances?sequence=OrderSequence&context_id=o1") == view);
    expect_refusal(f.call("GET", "/api/v1/instances/999999", view_token), 404, "instance 999999");
    expect_refusal(f.call("GET", "/api/v1/instances/abc", view_token), 404, "'abc'");
    expect_refusal(f.call("GET", "/api/v1/instances?sequence=OrderSequence&context_id=nope", view_token), 404, "'nope'");
    expect_refusal(f.call("GET", "/api/v1/instances?sequence=OrderSequence", view_token), 400, "'context_id' is missing");
}

BOOST_AUTO_TEST_CASE(a_message_by_id_and_by_key_with_its_instance) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto id = conf::message_id_of(f.b, "OrderPrepared", "p1");
    const auto view = f.get("/api/v1/messages/" + std::to_string(id));
    BOOST_TEST(view["message"]["id"] == id);
    BOOST_TEST(view["message"]["idempotence_id"] == "p1");
    BOOST_TEST(view["instance"]["context_id"] == "o1");
    BOOST_TEST(f.get("/api/v1/messages?type=OrderPrepared&idempotence_id=p1") == view);
    // percent-encoded parameters are decoded
    BOOST_TEST(f.get("/api/v1/messages?type=Order%50repared&idempotence_id=p1") == view);
    expect_refusal(f.call("GET", "/api/v1/messages/424242", view_token), 404, "message 424242");
    expect_refusal(f.call("GET", "/api/v1/messages?type=OrderPrepared&idempotence_id=nope", view_token), 404, "'nope'");
    expect_refusal(f.call("GET", "/api/v1/messages?idempotence_id=p1", view_token), 400, "'type' is missing");
    expect_refusal(f.call("GET", "/api/v1/messages?type=%ff&idempotence_id=p1", view_token), 400, "'type' must be UTF-8 text");
    expect_refusal(f.call("GET", "/api/v1/messages?type=A%00B&idempotence_id=p1", view_token), 400, "without NUL");
}

BOOST_AUTO_TEST_CASE(waiting_longest_lists_the_oldest_first_with_their_age) {
    api_fixture f;
    conf::expect_outcome(f.h.deliver("OrderShipped", "s2", "o2"), si::outcome::buffered);
    f.b.clock.advance(60s);
    conf::buffer_three(f.h);
    f.b.clock.advance(60s);
    const auto waiting = f.get("/api/v1/instances/waiting?limit=10")["instances"];
    BOOST_TEST_REQUIRE(waiting.size() == 2u);
    BOOST_TEST(waiting[0]["context_id"] == "o2");
    BOOST_TEST(waiting[0]["waiting"] == 1);
    BOOST_TEST(waiting[0]["waiting_age_seconds"].get<double>() == 120.0);
    BOOST_TEST(waiting[1]["waiting"] == 3);
    BOOST_TEST(f.get("/api/v1/instances/waiting?limit=1")["instances"].size() == 1u);
}

BOOST_AUTO_TEST_CASE(expired_and_expiring_instances_come_in_pages_that_follow_next) {
    api_fixture f;
    for (int i = 0; i < 5; ++i) conf::expect_outcome(f.h.deliver("OrderShipped", "s" + std::to_string(i), "o" + std::to_string(i)), si::outcome::buffered);
    f.b.clock.advance(std::chrono::hours(20));  // the order sequence keeps instances 24 h: past 0.75
    const auto expiring = f.get("/api/v1/instances/expiring?limit=3");
    BOOST_TEST(expiring["instances"].size() == 3u);
    BOOST_TEST(f.get("/api/v1/instances/expiring?share=0.9")["instances"].size() == 0u);
    BOOST_TEST(f.get("/api/v1/instances/expired")["instances"].size() == 0u);
    f.b.clock.advance(std::chrono::hours(5));
    std::vector<std::string> seen;
    std::string path = "/api/v1/instances/expired?limit=2";
    for (int page = 0; page < 5; ++page) {
        const auto body = f.get(path);
        for (const auto& i : body["instances"]) seen.push_back(i["context_id"].get<std::string>());
        if (body["next"].is_null()) break;
        path = "/api/v1/instances/expired?limit=2&after=" + body["next"].get<std::string>();
    }
    BOOST_TEST(seen == (std::vector<std::string>{"o0", "o1", "o2", "o3", "o4"}), boost::test_tools::per_element());
    expect_refusal(f.call("GET", "/api/v1/instances/expired?limit=0", view_token), 400, "'limit' must be a whole number from 1 to 1000, not '0'");
    expect_refusal(f.call("GET", "/api/v1/instances/expired?limit=5000", view_token), 400, "not '5000'");
    expect_refusal(f.call("GET", "/api/v1/instances/expired?after=yesterday", view_token), 400, "not 'yesterday'");
    // a cursor past what a timestamp holds (it overflowed when converted to nanoseconds)
    expect_refusal(f.call("GET", "/api/v1/instances/expired?after=9223372036854775807.1", view_token), 400, "not '9223372036854775807.1'");
    expect_refusal(f.call("GET", "/api/v1/instances/expiring?share=1.5", view_token), 400, "'share' must be a decimal number in (0, 1], not '1.5'");
    // only a plain decimal: not a value with a NUL and more after it, a hexadecimal float, an exponent or a blank
    for (const std::string share : {"0.5%00junk", "0x1p-1", "5e-1", "%200.5", "+0.5", "inf", ".", ""})
        expect_refusal(f.call("GET", "/api/v1/instances/expiring?share=" + share, view_token), 400, "'share' must be");
    BOOST_TEST(f.get("/api/v1/instances/expiring?share=1")["instances"].size() == 0u);
}

// Issue 34: the view of an instance with 200,000 messages was 43 MB; now a page and a cursor.
BOOST_AUTO_TEST_CASE(an_instance_with_many_messages_comes_in_pages_that_follow_next) {
    api_fixture f;
    constexpr int count = 20'000;
    {
        auto tx = f.b.store.begin();
        for (int k = 0; k < count; ++k)
            tx.insert_message(conf::order_row(f.b, "o1", "OrderShipped", "m-" + std::to_string(k), k % 2 ? si::message_state::processed : si::message_state::waiting));
        tx.commit();
    }
    const auto path = "/api/v1/instances/" + std::to_string(conf::instance_id_of(f.b, "o1"));
    const auto reply = f.call("GET", path, view_token);
    BOOST_TEST_REQUIRE(reply.status == 200);
    BOOST_TEST(reply.body.size() < 200'000u, reply.body.size() << " bytes for " << count << " messages");
    const auto first = json::parse(reply.body);
    BOOST_TEST(first["messages"].size() == 100u);
    BOOST_TEST(first["message_counts"] == (json{{"WAITING", count / 2}, {"PROCESSED", count / 2}, {"FAILED", 0}}));
    BOOST_TEST_REQUIRE(first["next"].is_string());
    BOOST_TEST(first["next"] == std::to_string(first["messages"].back()["id"].get<long long>()));

    std::vector<long long> seen;
    std::string after;
    for (int page = 0; page < 25; ++page) {
        const auto body = f.get(path + "?limit=1000" + (after.empty() ? "" : "&after=" + after));
        for (const auto& m : body["messages"]) seen.push_back(m["id"].get<long long>());
        if (body["next"].is_null()) break;
        after = body["next"].get<std::string>();
    }
    BOOST_TEST(seen.size() == std::size_t{count});
    BOOST_TEST(std::ranges::is_sorted(seen));
    BOOST_TEST((std::ranges::adjacent_find(seen) == seen.end()));  // each once
    const auto by_name = f.get("/api/v1/instances?sequence=OrderSequence&context_id=o1&limit=2&after=" + std::to_string(seen[10]));
    BOOST_TEST_REQUIRE(by_name["messages"].size() == 2u);
    BOOST_TEST(by_name["messages"][0]["id"] == seen[11]);
    BOOST_TEST(by_name["next"] == std::to_string(seen[12]));
    expect_refusal(f.call("GET", path + "?limit=1001", view_token), 400, "'limit' must be a whole number from 1 to 1000, not '1001'");
    expect_refusal(f.call("GET", path + "?limit=0", view_token), 400, "not '0'");
    expect_refusal(f.call("GET", path + "?after=yesterday", view_token), 400, "'after' must be the 'next' of the page before, not 'yesterday'");
    expect_refusal(f.call("GET", "/api/v1/instances?sequence=OrderSequence&context_id=o1&after=-3", view_token), 400, "not '-3'");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(actions)

BOOST_AUTO_TEST_CASE(a_consume_requested_by_id_is_executed_by_the_pending_action_job) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto id = conf::message_id_of(f.b, "OrderValidated", "v1");
    const auto reply = f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "id": )" + std::to_string(id) + "}");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(json::parse(reply.body) == (json{{"requested", "CONSUME"}, {"message", id}}));
    BOOST_TEST(f.get("/api/v1/messages/" + std::to_string(id))["message"]["pending_action"] == "CONSUME");
    BOOST_TEST(f.h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(f.get("/api/v1/messages/" + std::to_string(id))["message"]["state"] == "PROCESSED");
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "EXPIRE", "id": )" + std::to_string(id) + "}"), 409,
                   "is not in a state the action takes");
}

BOOST_AUTO_TEST_CASE(an_expire_requested_by_key) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto reply = f.post("/api/v1/messages/actions", R"({"action": "EXPIRE", "type": "OrderShipped", "idempotence_id": "s1"})");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(json::parse(reply.body)["message"] == conf::message_id_of(f.b, "OrderShipped", "s1"));
    BOOST_TEST(f.h.inbox->run_pending_actions() == 1u);
    conf::expect_rows(f.b, "OrderShipped", "s1", {"PROCESSED"});
    conf::expect_calls(f.h.log, {});  // expired: not replayed
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "EXPIRE", "type": "OrderShipped", "idempotence_id": "nope"})"), 404, "'nope'");
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "EXPIRE", "id": 999999})"), 404, "no message 999999");
}

BOOST_AUTO_TEST_CASE(a_failed_message_without_a_record_is_refused_with_the_reason) {
    api_fixture f(both_tokens(), conf::fail_first("OrderCreated"));
    conf::expect_outcome(f.h.deliver("OrderCreated", "c1", "o1"), si::outcome::failed);
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "type": "OrderCreated", "idempotence_id": "c1"})"), 409,
                   "holds no record to replay");
}

BOOST_AUTO_TEST_CASE(instance_actions_by_id_and_by_sequence_and_context_id) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto id = conf::instance_id_of(f.b, "o1");
    auto reply = f.post("/api/v1/instances/actions", R"({"action": "CONSUME_ALL", "sequence": "OrderSequence", "context_id": "o1"})");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(json::parse(reply.body) == (json{{"requested", "CONSUME_ALL"}, {"instance", id}}));
    BOOST_TEST(f.get("/api/v1/instances/" + std::to_string(id))["pending_action"] == "CONSUME_ALL");
    reply = f.post("/api/v1/instances/actions", R"({"action": "CLOSE", "id": )" + std::to_string(id) + "}");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(f.h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(f.get("/api/v1/instances/" + std::to_string(id))["instance"]["state"] == "CLOSED");
    expect_refusal(f.post("/api/v1/instances/actions", R"({"action": "CLOSE", "id": )" + std::to_string(id) + "}"), 409, "an instance OPEN");
    expect_refusal(f.post("/api/v1/instances/actions", R"({"action": "CLOSE", "id": 777})"), 404, "no instance 777");
    expect_refusal(f.post("/api/v1/instances/actions", R"({"action": "CLOSE", "sequence": "OrderSequence", "context_id": "o9"})"), 404, "'o9'");
}

BOOST_AUTO_TEST_CASE(bad_bodies_are_refused_naming_what_is_wrong) {
    api_fixture f;
    conf::buffer_three(f.h);
    const std::string messages = "/api/v1/messages/actions";
    expect_refusal(f.post(messages, "consume it please"), 400, "not JSON: 'consume it please'");
    expect_refusal(f.post(messages, "[1, 2]"), 400, "must be a JSON object");
    expect_refusal(f.post(messages, R"({"id": 1})"), 400, "'action' is missing");
    expect_refusal(f.post(messages, R"({"action": "CLOSE", "id": 1})"), 400, "'action' must be CONSUME or EXPIRE, not \"CLOSE\"");
    expect_refusal(f.post(messages, R"({"action": "CONSUME"})"), 400, "give either 'id' or 'type' and 'idempotence_id'");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "id": -3})"), 400, "'id' must be a positive integer, not -3");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "id": "7"})"), 400, "not \"7\"");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "type": "OrderShipped"})"), 400, "give both 'type' and 'idempotence_id'");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "id": 1, "force": true})"), 400, "unknown field 'force'");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "id": 1, "type": "OrderShipped"})"), 400, "give either");
    expect_refusal(f.post(messages, ""), 400, "not JSON");
    // a deep body is refused, not dumped recursively into the error text (that overflowed the stack)
    expect_refusal(f.post(messages, std::string(30000, '[') + std::string(30000, ']')), 400, "not a JSON array");
    expect_refusal(f.post(messages, R"({"action": "CONSUME", "id": )" + std::string(30000, '[') + std::string(30000, ']') + "}"), 400,
                   "not a JSON array");
    expect_refusal(f.post(messages, R"({"action": "EXPIRE", "type": "OrderShipped\u0000zzz", "idempotence_id": "s1"})"), 400,
                   "without NUL characters");
    expect_refusal(f.post("/api/v1/instances/actions", R"({"action": "CONSUME", "id": 1})"), 400, "CONSUME_ALL or CLOSE or SKIP_GAP");
    BOOST_TEST(f.h.inbox->run_pending_actions() == 0u);  // nothing was requested
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// The ledger (numbered: header seq, first number 1) beside the order sequence.
si::declarations<conf::message> ledger_and_orders() {
    auto decls = si::example::ledger_declarations<conf::message>();
    for (auto& s : si::testing::order_declarations().sequences) decls.sequences.push_back(std::move(s));
    return decls;
}

/// What the relay passes: the declared numbering of a numbered sequence.
si::relay::detail::declared_numbering numbering_of(const si::declarations<conf::message>& decls) {
    return [decls](const std::string& name) -> std::optional<si::numbering_rules> {
        for (const auto& s : decls.sequences)
            if (s.name == name && s.numbered()) return s.numbering;
        return std::nullopt;
    };
}

struct ledger_fixture : api_fixture {
    explicit ledger_fixture(bool declared = true)
        : api_fixture(both_tokens(), {}, ledger_and_orders(), declared ? numbering_of(ledger_and_orders()) : nullptr) {}
    void entry(const std::string& id, const std::string& context, int number) {
        auto record = si::testing::record("LedgerEntry", id, context);
        record.headers.push_back({"seq", std::to_string(number)});
        h.deliver(record);
    }
    json numbering(const std::string& context) { return get("/api/v1/instances?sequence=LedgerSequence&context_id=" + context)["numbering"]; }
    /// a: 1 released, 3 4 7 waiting; b: 3 waiting (1 and 2 never came).
    void gaps() {
        for (const auto& [id, n] : std::vector<std::pair<std::string, int>>{{"e1", 1}, {"e3", 3}, {"e4", 4}, {"e7", 7}, {"e3b", 3}}) entry(id, "a", n);
        entry("b3", "b", 3);
    }
};

json progress(json last_released, json waiting, json missing) {
    return {{"last_released", std::move(last_released)}, {"waiting", std::move(waiting)}, {"missing", std::move(missing)}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(numbered)

BOOST_AUTO_TEST_CASE(a_numbered_instance_shows_its_last_released_waiting_and_missing_numbers) {
    ledger_fixture f;
    f.gaps();
    BOOST_TEST(f.numbering("a") == progress(1, {3, 4, 7}, {{2, 2}, {5, 6}}));
    BOOST_TEST(f.numbering("b") == progress(nullptr, {3}, {{1, 2}}));  // from the declared first number
    conf::buffer_three(f.h);
    BOOST_TEST(f.get("/api/v1/instances/" + std::to_string(conf::instance_id_of(f.b, "o1")))["numbering"].is_null());
}

BOOST_AUTO_TEST_CASE(without_the_declarations_missing_numbers_start_at_the_first_waiting_one) {
    ledger_fixture f(false);  // `seqinbox serve`
    f.gaps();
    BOOST_TEST(f.numbering("a") == progress(1, {3, 4, 7}, {{2, 2}, {5, 6}}));
    BOOST_TEST(f.numbering("b") == progress(nullptr, {3}, json::array()));
    conf::buffer_three(f.h);
    BOOST_TEST(f.get("/api/v1/instances/" + std::to_string(conf::instance_id_of(f.b, "o1")))["numbering"].is_null());
}

BOOST_AUTO_TEST_CASE(skip_gap_by_id_and_by_name_releases_what_follows_the_gap) {
    ledger_fixture f;
    f.gaps();
    const auto a = f.b.find_instance("LedgerSequence", "a")->id;
    auto reply = f.post("/api/v1/instances/actions", R"({"action": "SKIP_GAP", "id": )" + std::to_string(a) + "}");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(json::parse(reply.body) == (json{{"requested", "SKIP_GAP"}, {"instance", a}}));
    BOOST_TEST(f.get("/api/v1/instances/" + std::to_string(a))["pending_action"] == "SKIP_GAP");
    BOOST_TEST(f.h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(f.numbering("a") == progress(4, {7}, {{5, 6}}));
    reply = f.post("/api/v1/instances/actions", R"({"action": "SKIP_GAP", "sequence": "LedgerSequence", "context_id": "a"})");
    BOOST_TEST(reply.status == 202, reply.body);
    BOOST_TEST(f.h.inbox->run_pending_actions() == 1u);
    BOOST_TEST(f.numbering("a") == progress(7, json::array(), json::array()));
    conf::expect_calls(f.h.log, {"LedgerEntry/e1", "LedgerEntry/e3 (replayed)", "LedgerEntry/e4 (replayed)", "LedgerEntry/e7 (replayed)"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(refusals)

BOOST_AUTO_TEST_CASE(without_a_token_every_api_call_is_refused_401_when_a_view_token_is_configured) {
    api_fixture f;
    for (const auto* path : {"/api/v1/whoami", "/api/v1/counts", "/api/v1/instances/1", "/api/v1/nothing/here"}) {
        const auto reply = f.call("GET", path);
        expect_refusal(reply, 401, "a bearer token (view or write) is required");
        BOOST_TEST(contains(reply.head, "WWW-Authenticate: Bearer"));
    }
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "id": 1})", ""), 401, "required");
}

BOOST_AUTO_TEST_CASE(a_wrong_token_is_refused_401_even_one_character_off) {
    api_fixture f;
    expect_refusal(f.call("GET", "/api/v1/counts", view_token.substr(0, view_token.size() - 1) + "x"), 401, "not valid");
    expect_refusal(f.call("GET", "/api/v1/counts", view_token + "x"), 401, "not valid");
    expect_refusal(f.call("GET", "/api/v1/counts", "", {}, {"Authorization: Basic " + view_token}), 401, "not valid");
}

BOOST_AUTO_TEST_CASE(the_view_token_cannot_write) {
    api_fixture f;
    conf::buffer_three(f.h);
    const auto id = std::to_string(conf::instance_id_of(f.b, "o1"));
    expect_refusal(f.post("/api/v1/instances/actions", R"({"action": "CLOSE", "id": )" + id + "}", view_token), 403, "the view token may not");
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "id": 1})", view_token), 403, "the view token may not");
    BOOST_TEST(f.h.inbox->run_pending_actions() == 0u);
    BOOST_TEST(f.get("/api/v1/instances/" + id)["instance"]["state"] == "OPEN");
}

BOOST_AUTO_TEST_CASE(without_a_write_token_nobody_writes_and_without_a_view_token_views_are_open_on_loopback) {
    api_fixture f(si::relay::access_tokens{});
    const auto who = json::parse(f.call("GET", "/api/v1/whoami").body);
    BOOST_TEST(who["role"] == "none");
    BOOST_TEST(who["views_open"] == true);
    BOOST_TEST(who["writes_enabled"] == false);
    BOOST_TEST(f.call("GET", "/api/v1/counts").status == 200);
    expect_refusal(f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "id": 1})", ""), 403, "no write token is configured");
    // a page elsewhere that rebinds its name to 127.0.0.1 sends its own name as Host
    const auto rebound = si::test::http_exchange(f.endpoint.port(), "GET /api/v1/counts HTTP/1.1\r\nHost: evil.example:9464\r\n\r\n", 10s);
    expect_refusal(rebound, 421, "'evil.example:9464'");
    BOOST_TEST(si::test::http_exchange(f.endpoint.port(), "GET /api/v1/counts HTTP/1.1\r\nHost: localhost:9464\r\n\r\n", 10s).status == 200);
}

// Review of issue 34: /healthz and /metrics skipped the Host check, so a page elsewhere whose name
// was rebound to 127.0.0.1 could read them while views were open.
BOOST_AUTO_TEST_CASE(the_probes_need_no_token_but_take_the_host_check_while_views_are_open) {
    const auto probe = [] { return si::relay::http_response{200, "text/plain; charset=utf-8", "ok\n"}; };
    for (const bool views_open : {true, false}) {
        const si::relay::http_access access(views_open ? si::relay::access_tokens{} : both_tokens(), {});
        si::relay::http_endpoint endpoint({}, {{"/healthz", probe}, {"/metrics", probe}}, {}, {.fixed_gate = si::relay::probe_gate(access)});
        const auto get = [&](const std::string& path, const std::string& host) {
            return si::test::http_exchange(endpoint.port(), "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 10s);
        };
        for (const std::string path : {"/healthz", "/metrics"}) {
            const auto rebound = get(path, "rebound.example:9464");
            BOOST_TEST(rebound.status == (views_open ? 421 : 200), path << " (views open: " << views_open << "): " << rebound.body);
            if (views_open) BOOST_TEST(contains(rebound.body, "not 'rebound.example:9464'"), rebound.body);
            BOOST_TEST(get(path, "127.0.0.1:" + std::to_string(endpoint.port())).status == 200, path);
            BOOST_TEST(get(path, "localhost:9464").status == 200, path);
        }
    }
}

BOOST_AUTO_TEST_CASE(unknown_paths_and_wrong_methods) {
    api_fixture f;
    expect_refusal(f.call("GET", "/api/v1/nothing", view_token), 404, "no such path: '/api/v1/nothing'");
    expect_refusal(f.call("GET", "/api/v2/counts", view_token), 404, "no such path");
    expect_refusal(f.call("GET", "/elsewhere", view_token), 404, "no such path");
    const auto get_on_write = f.call("GET", "/api/v1/messages/actions", write_token);
    expect_refusal(get_on_write, 405, "POST");
    BOOST_TEST(contains(get_on_write.head, "Allow: POST"));
    expect_refusal(f.call("DELETE", "/api/v1/instances/1", write_token), 405, "GET");
}

BOOST_AUTO_TEST_CASE(oversize_and_chunked_requests_are_refused) {
    api_fixture f;
    const auto big = f.post("/api/v1/messages/actions", R"({"action": "CONSUME", "id": 1, "pad": ")" + std::string(70 * 1024, 'x') + "\"}");
    BOOST_TEST(big.status == 413);
    BOOST_TEST(contains(big.body, "larger than 64 KiB"));
    const auto long_head = f.call("GET", "/api/v1/counts", view_token, {}, {"X-Filler: " + std::string(9000, 'y')});
    BOOST_TEST(long_head.status == 431);
    const auto chunked = si::test::http_exchange(
        f.endpoint.port(), "POST /api/v1/messages/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 10s);
    BOOST_TEST(chunked.status == 411);
    const auto bad_length = si::test::http_exchange(f.endpoint.port(), "POST /api/v1/messages/actions HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 10s);
    BOOST_TEST(bad_length.status == 400);
    const auto twice = si::test::http_exchange(f.endpoint.port(),
                                               "POST /api/v1/messages/actions HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello", 10s);
    BOOST_TEST(twice.status == 400);
    // a request line alone, without any header, is a request (no Host: refused by the Host check, not as malformed)
    expect_refusal(si::test::http_exchange(f.endpoint.port(), "GET /api/v1/counts HTTP/1.1\r\n\r\n", 10s), 401, "required");
    const auto spaced = si::test::http_exchange(
        f.endpoint.port(), "POST /api/v1/messages/actions HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 10s);
    BOOST_TEST(spaced.status == 411);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tokens)

namespace {

std::filesystem::path token_file(const std::string& name, const std::string& content) {
    const auto path = std::filesystem::temp_directory_path() / ("seqinbox-token-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path) << content;
    return path;
}

void expect_configuration_error(const std::function<void()>& f, const std::string& part) {
    try {
        f();
        BOOST_ERROR("no error; expected one mentioning: " + part);
    } catch (const si::error& e) {
        BOOST_TEST((e.category() == si::error_category::configuration));
        BOOST_TEST(contains(e.what(), part), e.what());
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokens_come_from_files_or_the_environment) {
    const auto view = token_file("view", view_token + "\n");
    const auto tokens = si::relay::read_access_tokens(view, std::nullopt);
    BOOST_TEST(tokens.view == view_token);
    BOOST_TEST(!tokens.write.has_value());
    ::setenv(si::relay::write_token_variable, write_token.c_str(), 1);
    BOOST_TEST(si::relay::read_access_tokens(view, std::nullopt).write == write_token);
    ::unsetenv(si::relay::write_token_variable);
    std::filesystem::remove(view);
}

BOOST_AUTO_TEST_CASE(short_missing_blank_and_shared_tokens_are_refused) {
    const auto short_one = token_file("short", "secret\n");
    expect_configuration_error([&] { si::relay::read_access_tokens(short_one, std::nullopt); }, "has 6 characters; give at least 16");
    expect_configuration_error([&] { si::relay::read_access_tokens(std::filesystem::path("/nonexistent/token"), std::nullopt); },
                               "'/nonexistent/token' cannot be read");
    const auto spaced = token_file("spaced", "0123456789 abcdefgh\n");
    expect_configuration_error([&] { si::relay::read_access_tokens(spaced, std::nullopt); }, "white space");
    const auto same = token_file("same", view_token);
    expect_configuration_error([&] { si::relay::read_access_tokens(same, same); }, "the view and write tokens are the same");
    ::setenv(si::relay::view_token_variable, "tiny", 1);
    expect_configuration_error([&] { si::relay::read_access_tokens(std::nullopt, std::nullopt); }, "environment variable SEQINBOX_VIEW_TOKEN");
    ::unsetenv(si::relay::view_token_variable);
    for (const auto& p : {short_one, spaced, same}) std::filesystem::remove(p);
}

BOOST_AUTO_TEST_CASE(an_address_other_than_loopback_needs_a_view_token) {
    expect_configuration_error([] { si::relay::http_access({}, {.host = "0.0.0.0", .port = 0}); },
                               "refusing to listen on 0.0.0.0 without a view token");
    BOOST_CHECK_NO_THROW(si::relay::http_access(both_tokens(), {.host = "0.0.0.0", .port = 0}));
    BOOST_CHECK_NO_THROW(si::relay::http_access({}, {.host = "127.0.0.2", .port = 0}));
    expect_configuration_error([] { si::relay::http_endpoint({.host = "localhost", .port = 0}, {}, {}); }, "'localhost' is not an IPv4 address");
}

BOOST_AUTO_TEST_SUITE_END()
