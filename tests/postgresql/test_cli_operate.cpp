// The operator subcommands against a real inbox database: read views (status, sequences, show)
// and pending actions (consume, expire, consume-all, close), their output, JSON and exit codes.
#define BOOST_TEST_MODULE seqinbox postgresql cli operate
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "pg_test_support.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::contains;
using seqinbox::test::pg_server;
using seqinbox::test::run_cli;
using seqinbox::test::shell_quote;

namespace {

using inbox_type = si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink>;

/// o1: OrderValidated v1, OrderPrepared p1, OrderShipped s1 waiting; o2: complete and closed.
struct populated {
    populated() : conninfo(pg_server::shared().create_database()), admin(soci::postgresql, conninfo) {
        pg::migrate(conninfo);
        store.emplace(pg::store_options{conninfo, 4});
        inbox.emplace(*store, source, sink, si::testing::order_declarations());
        for (const auto& m : inbox->declared().sequences.front().messages) inbox->on(m.qualified_type(), [](auto&&, auto&&) {});
        for (const char* type : {"OrderValidated", "OrderPrepared", "OrderShipped"}) inbox->deliver(si::testing::record(type, "x-" + std::string(type), "o1"));
        for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
            inbox->deliver(si::testing::record(type, std::string(type) + "@o2", "o2"));
    }

    std::string with_db(const std::string& command) const { return command + " --postgres " + shell_quote(conninfo); }
    long long id_of(const std::string& sql) { return seqinbox::test::count(admin, sql); }
    /// Moves o1's creation and retention `hours` into the past.
    void age_o1(int hours) {
        admin << "UPDATE sequence_instance SET created_at = created_at - make_interval(hours => " + std::to_string(hours) +
                     "), retain_until = retain_until - make_interval(hours => " + std::to_string(hours) + ") WHERE context_id = 'o1'";
    }

    std::string conninfo;
    soci::session admin;
    si::memory::source source;
    si::memory::error_sink sink;
    std::optional<pg::store> store;
    std::optional<inbox_type> inbox;
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(status_counts_instances_and_messages, populated) {
    const auto table = run_cli(with_db("status"));
    BOOST_TEST(table.exit_code == 0, table.output);
    BOOST_TEST(contains(table.output, "OrderSequence  OPEN  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderSequence  CLOSED  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderValidated  WAITING  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderValidated  PROCESSED  1"), table.output);
    const auto json = run_cli(with_db("status") + " --json");
    BOOST_TEST(json.exit_code == 0, json.output);
    BOOST_TEST(contains(json.output, R"({"type": "OrderShipped", "state": "WAITING", "count": 1})"), json.output);
    BOOST_TEST(contains(json.output, R"({"sequence": "OrderSequence", "state": "CLOSED", "count": 1})"), json.output);
}

BOOST_FIXTURE_TEST_CASE(sequences_lists_expiring_then_expired_instances, populated) {
    BOOST_TEST(contains(run_cli(with_db("sequences --expiring")).output, "0 instances"));
    age_o1(20);  // 20 of 24 hours used: past the default share 0.75
    const auto expiring = run_cli(with_db("sequences --expiring"));
    BOOST_TEST(expiring.exit_code == 0, expiring.output);
    BOOST_TEST(contains(expiring.output, "OrderSequence  o1  OPEN"), expiring.output);
    BOOST_TEST(contains(expiring.output, "1 instance\n"), expiring.output);
    BOOST_TEST(contains(run_cli(with_db("sequences --expiring --share 0.9")).output, "0 instances"));
    BOOST_TEST(contains(run_cli(with_db("sequences --expired")).output, "0 instances"));
    age_o1(5);
    const auto expired = run_cli(with_db("sequences --expired --json"));
    BOOST_TEST(expired.exit_code == 0, expired.output);
    BOOST_TEST(contains(expired.output, R"("context_id": "o1", "state": "OPEN")"), expired.output);
}

BOOST_FIXTURE_TEST_CASE(show_and_actions_through_the_pending_action_job, populated) {
    const auto shown = run_cli(with_db("show") + " OrderSequence o1");
    BOOST_TEST(shown.exit_code == 0, shown.output);
    BOOST_TEST(contains(shown.output, "OrderValidated  x-OrderValidated  WAITING"), shown.output);
    const auto missing = run_cli(with_db("show") + " OrderSequence nope");
    BOOST_TEST(missing.exit_code == 1, missing.output);
    BOOST_TEST(contains(missing.output, "no instance of sequence 'OrderSequence' for context id 'nope'"), missing.output);

    const auto v1 = std::to_string(id_of("SELECT id FROM sequenced_message WHERE idempotence_id = 'x-OrderValidated'"));
    const auto consume = run_cli(with_db("consume " + v1));
    BOOST_TEST(consume.exit_code == 0, consume.output);
    BOOST_TEST(contains(consume.output, "requested consume on message " + v1), consume.output);
    BOOST_TEST(contains(run_cli(with_db("show") + " OrderSequence o1 --json").output, R"("state": "WAITING")"));
    BOOST_TEST(contains(run_cli(with_db("show") + " OrderSequence o1").output, "pending CONSUME"));
    const auto absent = run_cli(with_db("expire 999999"));
    BOOST_TEST(absent.exit_code == 1, absent.output);
    BOOST_TEST(contains(absent.output, "no message 999999"), absent.output);

    BOOST_TEST(inbox->run_pending_actions() == 1u);
    BOOST_TEST(id_of("SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'x-OrderValidated' AND state = 'PROCESSED'") == 1);
    const auto processed = run_cli(with_db("consume " + v1));
    BOOST_TEST(processed.exit_code == 1, processed.output);
    BOOST_TEST(contains(processed.output, "message " + v1 + " is not in a state the action takes"), processed.output);

    const auto o1 = std::to_string(id_of("SELECT id FROM sequence_instance WHERE context_id = 'o1'"));
    const auto o2 = std::to_string(id_of("SELECT id FROM sequence_instance WHERE context_id = 'o2'"));
    BOOST_TEST(run_cli(with_db("consume-all " + o2)).exit_code == 1);  // CLOSED
    BOOST_TEST(run_cli(with_db("close " + o1)).exit_code == 0);
    BOOST_TEST(inbox->run_pending_actions() == 1u);
    BOOST_TEST(id_of("SELECT count(*) FROM sequence_instance WHERE context_id = 'o1' AND state = 'CLOSED'") == 1);
    BOOST_TEST(id_of("SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'") == 2);  // closed without replay
}

namespace {

/// The ids of the messages in `show --json` output, in order.
std::vector<long long> message_ids(const std::string& output) {
    static const std::regex message(R"(\{"id": (\d+), "type")");
    std::vector<long long> ids;
    for (std::sregex_iterator it(output.begin(), output.end(), message), end; it != end; ++it) ids.push_back(std::stoll((*it)[1]));
    return ids;
}

/// The "next" cursor of `show --json` output; empty when it is null.
std::string next_of(const std::string& output) {
    static const std::regex next(R"re("next": "(\d+)")re");
    std::smatch found;
    return std::regex_search(output, found, next) ? found[1].str() : std::string();
}

}  // namespace

// Issue 34: show printed every message of an instance; now a page, and how to get the next.
BOOST_FIXTURE_TEST_CASE(show_pages_an_instance_with_many_messages, populated) {
    admin << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
             " SELECT id, 'OrderCreated', 'many-' || n, 'PROCESSED', now(), now() FROM sequence_instance, generate_series(1, 250) n"
             " WHERE context_id = 'o1'";  // o1: 3 WAITING, 250 PROCESSED
    const auto hundredth = std::to_string(id_of("SELECT m.id FROM sequenced_message m JOIN sequence_instance i ON i.id = m.sequence_instance_id"
                                                " WHERE i.context_id = 'o1' ORDER BY m.id OFFSET 99 LIMIT 1"));
    const auto first = run_cli(with_db("show") + " OrderSequence o1 --json");
    BOOST_TEST(first.exit_code == 0, first.output);
    BOOST_TEST(message_ids(first.output).size() == 100u);
    BOOST_TEST(next_of(first.output) == hundredth);
    BOOST_TEST(contains(first.output, R"("message_counts": {"WAITING": 3, "PROCESSED": 250, "FAILED": 0})"), first.output);

    std::vector<long long> walked;
    std::string after;
    for (int page = 0; page < 10; ++page) {
        const auto shown = run_cli(with_db("show") + " OrderSequence o1 --json --limit 120" + (after.empty() ? "" : " --after " + after));
        BOOST_TEST_REQUIRE(shown.exit_code == 0, shown.output);
        for (const auto id : message_ids(shown.output)) walked.push_back(id);
        after = next_of(shown.output);
        if (after.empty()) {
            BOOST_TEST(contains(shown.output, R"("next": null)"), shown.output);
            break;
        }
    }
    BOOST_TEST(walked.size() == 253u);
    BOOST_TEST(std::ranges::is_sorted(walked));
    BOOST_TEST((std::ranges::adjacent_find(walked) == walked.end()));  // each once

    const auto table = run_cli(with_db("show") + " OrderSequence o1 --limit 5");
    BOOST_TEST(table.exit_code == 0, table.output);
    BOOST_TEST(contains(table.output, "5 of 253 messages (WAITING 3, PROCESSED 250, FAILED 0)"), table.output);
    BOOST_TEST(contains(table.output, "--after " + std::to_string(walked[4])), table.output);
    const auto last = run_cli(with_db("show") + " OrderSequence o1 --after " + std::to_string(walked[250]));
    BOOST_TEST(contains(last.output, "2 of 253 messages"), last.output);
    BOOST_TEST(!contains(last.output, "--after"), last.output);
    const auto over = run_cli(with_db("show") + " OrderSequence o1 --limit 1001");
    BOOST_TEST(over.exit_code == 2, over.output);
    BOOST_TEST(contains(over.output, "'--limit' expects a whole number from 1 to 1000, not '1001'"), over.output);
    BOOST_TEST(run_cli(with_db("show") + " OrderSequence o1 --after x").exit_code == 2);
}

BOOST_FIXTURE_TEST_CASE(a_message_is_addressed_by_its_key, populated) {
    const auto expire = run_cli(with_db("expire --type OrderPrepared --idempotence-id x-OrderPrepared"));
    BOOST_TEST(expire.exit_code == 0, expire.output);
    BOOST_TEST(contains(expire.output, "requested expire on message OrderPrepared/x-OrderPrepared"), expire.output);
    BOOST_TEST(contains(run_cli(with_db("show") + " OrderSequence o1").output, "x-OrderPrepared  WAITING"));
    BOOST_TEST(inbox->run_pending_actions() == 1u);
    BOOST_TEST(id_of("SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'x-OrderPrepared' AND state = 'PROCESSED'") == 1);

    const auto unknown = run_cli(with_db("consume --type OrderPrepared --idempotence-id nope"));
    BOOST_TEST(unknown.exit_code == 1, unknown.output);
    BOOST_TEST(contains(unknown.output, "no message OrderPrepared/nope"), unknown.output);
    const auto half = run_cli(with_db("consume --type OrderPrepared"));
    BOOST_TEST(half.exit_code == 2, half.output);
    BOOST_TEST(contains(half.output, "give both --type and --idempotence-id"), half.output);
    const auto both = run_cli(with_db("consume 5 --type OrderPrepared --idempotence-id x"));
    BOOST_TEST(both.exit_code == 2, both.output);
    BOOST_TEST(contains(both.output, "not both"), both.output);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_and_an_unreachable_database_1) {
    BOOST_TEST(run_cli("status").exit_code == 2);
    BOOST_TEST(contains(run_cli("status").output, "option '--postgres' is required"));
    BOOST_TEST(contains(run_cli("sequences --postgres x").output, "give --expired or --expiring"));
    const auto share = run_cli("sequences --postgres x --expiring --share 2");
    BOOST_TEST(share.exit_code == 2);
    BOOST_TEST(contains(share.output, "'--share' expects a decimal number in (0, 1], not '2'"), share.output);
    const auto hexadecimal = run_cli("sequences --postgres x --expiring --share 0x1p-1");
    BOOST_TEST(hexadecimal.exit_code == 2);
    BOOST_TEST(contains(hexadecimal.output, "not '0x1p-1'"), hexadecimal.output);
    BOOST_TEST(run_cli("show --postgres x OrderSequence").exit_code == 2);
    const auto id = run_cli("consume --postgres x abc");
    BOOST_TEST(id.exit_code == 2);
    BOOST_TEST(contains(id.output, "expected a positive id, not 'abc'"), id.output);
    BOOST_TEST(run_cli("close --help").exit_code == 0);
    const auto down = run_cli("status --postgres 'host=127.0.0.1 port=1 dbname=x user=postgres connect_timeout=5'");
    BOOST_TEST(down.exit_code == 1, down.output);
    BOOST_TEST(contains(down.output, "seqinbox status: connection"), down.output);
}
