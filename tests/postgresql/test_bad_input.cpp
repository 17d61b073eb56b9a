// Hostile input on the PostgreSQL store. Keys (message type, idempotence id, context id) with
// quotes, backslashes and SQL text are stored and matched byte for byte; keys with NUL bytes,
// invalid UTF-8 or of a megabyte end as `rejected` with a reason in the error sink. Never does an
// SQL error escape deliver(), never is anything half stored. Payloads (record key, value, header
// values) are bytes: NULs and a megabyte are buffered and replayed exactly. And a store that
// cannot start says why, once, with the fix and without the password.
#define BOOST_TEST_MODULE seqinbox postgresql bad input
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg_test_support.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "support/world.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using si::testing::message;

namespace {

using pg_inbox = si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink>;

const std::string megabyte(std::size_t(1) << 20, 'k');

/// Strings that are SQL-ish but valid keys: they must round-trip exactly.
const std::vector<std::string> tricky_but_valid = {
    "it's",
    "O''Brien",
    "back\\slash\\",
    "\\x00\\000\\n",
    "\"; DROP TABLE x; --",
    "'); DROP TABLE sequenced_message; --",
    "100% _wild_ [card]*?",
    "Größe 注文 🚚",
    std::string(200, 'L'),
};

/// Strings no key may be: NUL bytes, invalid UTF-8, far longer than any key limit.
const std::map<std::string, std::string> invalid_keys = {
    {"NUL byte", std::string("a\0b", 3)},
    {"leading NUL", std::string("\0", 1)},
    {"invalid UTF-8", "\xff\xfe"},
    {"truncated UTF-8", "ok\xc3"},
    {"1 MB", megabyte},
};

/// The order sequence (context id = record key) plus a sequence whose message types are the
/// tricky strings (each after the one before), plus Payload.First -> Payload.Second whose context id
/// comes from the header "order", so the record key is free to carry arbitrary bytes.
si::declarations<message> hostile_declarations() {
    auto decls = si::testing::order_declarations();
    si::sequence_declaration<message> quirky{"QuirkySequence", std::chrono::hours(1), {}};
    for (std::size_t i = 0; i < tricky_but_valid.size(); ++i)  // a chain: each type waits for the one before
        quirky.messages.push_back(si::testing::declare(tricky_but_valid[i], i == 0 ? si::condition{} : si::after(tricky_but_valid[i - 1])));
    decls.sequences.push_back(std::move(quirky));

    auto from_header = [](const message&, const si::envelope& e) -> std::optional<std::string> {
        if (auto order = e.find_header("order")) return std::string(*order);
        return std::nullopt;
    };
    si::sequence_declaration<message> payload{"PayloadSequence", std::chrono::hours(1), {}};
    payload.messages = {si::testing::declare("PayloadFirst"), si::testing::declare("PayloadSecond", si::after("PayloadFirst"))};
    for (auto& m : payload.messages) m.context_id = from_header;
    decls.sequences.push_back(std::move(payload));
    return decls;
}

std::string hex(const std::string& bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string text;
    text.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        text += digits[c >> 4];
        text += digits[c & 0xf];
    }
    return text;
}

/// What a test sees of one delivery: its outcome, or the exception that escaped deliver().
std::string outcome_of(pg_inbox& inbox, const si::envelope& record) {
    try {
        return std::string(to_string(inbox.deliver(record).outcome));
    } catch (const std::exception& e) {
        return std::string("exception escaped deliver(): ") + e.what();
    }
}

/// Delivers `record` and checks its outcome; `label` names the case (shown with the actual outcome).
void expect_outcome(pg_inbox& inbox, const si::envelope& record, const std::string& expected, const std::string& label) {
    const std::string actual = outcome_of(inbox, record);
    BOOST_TEST(actual == expected, label << ": " << actual.substr(0, 400) << " (expected " << expected << ")");
}

/// A migrated database, its store and an inbox with recording listeners for every declared type.
struct hostile_fixture {
    hostile_fixture() : conninfo(migrated()), sql(soci::postgresql, conninfo) {
        si::testing::record_all(inbox, calls);
    }

    static std::string migrated() {
        std::string c = pg_server::shared().create_database();
        pg::migrate(c);
        return c;
    }

    /// Rows where `column` equals `value` exactly (bound as bytes, compared as bytes).
    long long rows_where(const std::string& table, const std::string& column, const std::string& value) {
        const std::string bytes = hex(value);
        long long n = -1;
        sql << "SELECT count(*) FROM " + table + " WHERE convert_to(" + column + ", 'UTF8') = decode(:h, 'hex')", soci::use(bytes),
            soci::into(n);
        return n;
    }

    long long total(const std::string& table) { return count(sql, "SELECT count(*) FROM " + table); }

    std::string conninfo;
    pg::store store{pg::store_options{.conninfo = conninfo, .pool_size = 4}};
    si::memory::source source;
    si::memory::error_sink sink;
    pg_inbox inbox{store, source, sink, hostile_declarations()};
    si::testing::call_log calls;
    soci::session sql;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(hostile_keys, hostile_fixture)

BOOST_AUTO_TEST_CASE(sql_text_quotes_and_backslashes_round_trip_as_idempotence_ids) {
    for (const auto& id : tricky_but_valid) {
        const auto record = si::testing::record("OrderCreated", id, "order-of-" + hex(id));
        expect_outcome(inbox, record, "processed", id);
        expect_outcome(inbox, record, "duplicate", id);
        BOOST_TEST(calls.count("OrderCreated", id) == 1u, id);
        BOOST_TEST(rows_where("sequenced_message", "idempotence_id", id) == 1, id);
        BOOST_TEST(rows_where("sequential_inbox_idempotence", "idempotence_id", id) == 1, id);
    }
    BOOST_TEST(total("sequenced_message") == static_cast<long long>(tricky_but_valid.size()));
    BOOST_TEST(sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE(sql_text_quotes_and_backslashes_round_trip_as_context_ids) {
    for (const auto& context_id : tricky_but_valid) {
        const std::string id = "c-" + hex(context_id);
        expect_outcome(inbox, si::testing::record("OrderCreated", id, context_id), "processed", context_id);
        // the successor finds the same instance by the same bytes
        expect_outcome(inbox, si::testing::record("OrderValidated", "v" + id, context_id), "processed", context_id);
        BOOST_TEST(rows_where("sequence_instance", "context_id", context_id) == 1, context_id);
    }
    BOOST_TEST(total("sequence_instance") == static_cast<long long>(tricky_but_valid.size()));
    BOOST_TEST(calls.size() == 2 * tricky_but_valid.size());
    BOOST_TEST(sink.size() == 0u);
}

BOOST_AUTO_TEST_CASE(sql_text_quotes_and_backslashes_round_trip_as_message_types) {
    // Delivered last to first: every type but the first waits, and the first releases the chain,
    // so the stored types are also matched when the release pass looks for waiting ones.
    for (auto type = tricky_but_valid.rbegin(); type + 1 != tricky_but_valid.rend(); ++type)
        expect_outcome(inbox, si::testing::record(*type, "m-1", "quirky-1"), "buffered", *type);
    const auto result = inbox.deliver(si::testing::record(tricky_but_valid.front(), "m-1", "quirky-1"));
    BOOST_TEST(to_string(result.outcome) == "processed");
    BOOST_TEST(result.released == tricky_but_valid.size() - 1);
    for (const auto& type : tricky_but_valid) {
        expect_outcome(inbox, si::testing::record(type, "m-1", "quirky-1"), "duplicate", type);
        BOOST_TEST(calls.count(type, "m-1") == 1u, type);
        BOOST_TEST(rows_where("sequenced_message", "message_type", type) == 1, type);
        BOOST_TEST(rows_where("sequential_inbox_idempotence", "message_type", type) == 1, type);
    }
    std::vector<std::string> handled;
    for (const auto& call : calls.calls()) handled.push_back(call.type);
    BOOST_TEST(handled == tricky_but_valid, "listeners ran in declared order");
    BOOST_TEST(count(sql, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") ==
               static_cast<long long>(tricky_but_valid.size()));
    BOOST_TEST(count(sql, "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED'") == 1);  // every type processed
    BOOST_TEST(sink.size() == 0u);
}

namespace {

/// Delivers `record` twice; both must be `rejected` with a reason in the error sink naming
/// `field` (and, for `short_reason`, quoting at most a prefix of the key), and nothing may be stored.
void expect_rejected_twice(hostile_fixture& f, const si::envelope& record, const std::string& what, const std::string& field,
                           bool short_reason = true) {
    const auto sink_before = f.sink.size();
    expect_outcome(f.inbox, record, "rejected", what);
    expect_outcome(f.inbox, record, "rejected", what);
    const auto records = f.sink.records();
    BOOST_TEST_REQUIRE(records.size() == sink_before + 2, what);
    const std::string& reason = records.back().reason;
    BOOST_TEST(reason.find(field) != std::string::npos, what << ": reason '" << reason.substr(0, 200) << "'");
    if (short_reason) BOOST_TEST(reason.size() < 2048u, what << ": the reason repeats the whole key");
    BOOST_TEST(f.total("sequenced_message") == 0, what);
    BOOST_TEST(f.total("sequential_inbox_idempotence") == 0, what);
    BOOST_TEST(f.total("sequence_instance") == 0, what);
    BOOST_TEST(f.calls.size() == 0u, what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(idempotence_ids_with_nul_invalid_utf8_or_a_megabyte_are_rejected) {
    for (const auto& [what, id] : invalid_keys)
        expect_rejected_twice(*this, si::testing::record("OrderCreated", id, "order-1"), what, "idempotence id");
}

BOOST_AUTO_TEST_CASE(context_ids_with_nul_invalid_utf8_or_a_megabyte_are_rejected) {
    for (const auto& [what, context_id] : invalid_keys)
        expect_rejected_twice(*this, si::testing::record("OrderCreated", "c-1", context_id), what, "context id");
}

BOOST_AUTO_TEST_CASE(message_types_with_nul_invalid_utf8_or_a_megabyte_are_rejected) {
    // Such types cannot be declared usefully, so they are unknown types; the engine quotes an
    // unknown type whole in the reason, hence no bound on its length here.
    for (const auto& [what, type] : invalid_keys)
        expect_rejected_twice(*this, si::testing::record(type, "m-1", "order-1"), what, "unknown message type", false);
}

BOOST_AUTO_TEST_CASE(declared_keys_over_the_limit_are_rejected_and_at_the_limit_stored) {
    const std::string at_limit(si::max_key_bytes, 'i'), over_limit(si::max_key_bytes + 1, 'i');
    BOOST_TEST(outcome_of(inbox, si::testing::record("OrderCreated", at_limit, "order-1")) == "processed");
    BOOST_TEST(outcome_of(inbox, si::testing::record("OrderCreated", at_limit, "order-1")) == "duplicate");
    BOOST_TEST(rows_where("sequenced_message", "idempotence_id", at_limit) == 1);
    BOOST_TEST(outcome_of(inbox, si::testing::record("OrderCreated", "c-at-limit", std::string(si::max_key_bytes, 'c'))) == "processed");
    BOOST_TEST(outcome_of(inbox, si::testing::record("OrderCreated", over_limit, "order-1")) == "rejected");
    BOOST_TEST(outcome_of(inbox, si::testing::record("OrderCreated", "c-over-limit", std::string(si::max_key_bytes + 1, 'c'))) == "rejected");
    BOOST_TEST(total("sequenced_message") == 2);
    BOOST_TEST(sink.size() == 2u);
}

BOOST_AUTO_TEST_CASE(nul_bytes_do_not_make_two_ids_collide) {
    // Were NUL-carrying ids cut at the NUL (C strings), both would be "a": the second a duplicate.
    const std::string one = outcome_of(inbox, si::testing::record("OrderCreated", std::string("a\0b", 3), "order-1"));
    const std::string two = outcome_of(inbox, si::testing::record("OrderCreated", std::string("a\0c", 3), "order-1"));
    BOOST_TEST(one == two);
    BOOST_TEST((one == "rejected" || one == "processed"), one);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- payloads are bytes ----

namespace {

/// Every byte value, repeated up to `size` bytes: NULs, invalid UTF-8 and all.
std::string all_bytes(std::size_t size) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 7 % 256);
    return bytes;
}

const std::string valid_traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// A PayloadSecond record of context "o-1" (header "order") with the given bytes.
si::envelope payload_second(const std::string& id, std::string key, std::string value, std::string traceparent = valid_traceparent) {
    si::envelope e = si::testing::record("PayloadSecond", id, "");
    e.key = std::move(key);
    e.value = std::move(value);
    e.headers.push_back({"order", "o-1"});
    e.headers.push_back({"blob", std::string("\0\xff\x01 binary \0", 12)});
    e.headers.push_back({std::string(si::traceparent_header), std::move(traceparent)});
    return e;
}

/// A fresh database and an inbox whose listeners keep the record and message of every replayed call.
struct replay_bench {
    std::string conninfo = hostile_fixture::migrated();
    pg::store store{pg::store_options{.conninfo = conninfo, .pool_size = 4}};
    si::memory::source source;
    si::memory::error_sink sink;
    pg_inbox inbox{store, source, sink, hostile_declarations()};
    std::map<std::string, si::envelope> replayed_records;
    std::map<std::string, std::string> replayed_messages;

    replay_bench() {
        for (const auto& seq : inbox.declared().sequences)
            for (const auto& msg : seq.messages)
                inbox.on(msg.qualified_type(), [this](const message& m, const pg_inbox::context& ctx) {
                    if (!ctx.replayed) return;
                    replayed_records.insert_or_assign(ctx.idempotence_id, ctx.record);
                    replayed_messages.insert_or_assign(ctx.idempotence_id, m);
                });
    }

    /// Rows WAITING with exactly the key and value bytes of `e`.
    long long waiting_with_bytes_of(const si::envelope& e) {
        soci::session sql(soci::postgresql, conninfo);
        long long n = -1;
        const std::string key = hex(e.key.value()), value = hex(e.value.value());
        sql << "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'"
               " AND key = decode(:k, 'hex') AND value = decode(:v, 'hex')",
            soci::use(key), soci::use(value), soci::into(n);
        return n;
    }

    /// Each of `records` (PayloadSecond, context o-1) is buffered with its bytes, then released by
    /// PayloadFirst and replayed with key, value, headers and decoded message byte for byte.
    void expect_buffered_then_replayed_exactly(const std::vector<si::envelope>& records) {
        for (const auto& e : records) {
            const std::string id(*e.find_header("idempotence-id"));
            expect_outcome(inbox, e, "buffered", id);
            BOOST_TEST(waiting_with_bytes_of(e) == 1, "stored bytes of " << id);
        }
        si::envelope first = si::testing::record("PayloadFirst", "f-1", "");
        first.headers.push_back({"order", "o-1"});
        const auto result = inbox.deliver(first);
        BOOST_TEST(to_string(result.outcome) == "processed");
        BOOST_TEST(result.released == records.size());
        BOOST_TEST(result.release_failures == 0u);
        for (const auto& e : records) expect_replayed_exactly(e);
        BOOST_TEST(sink.size() == 0u);
    }

    void expect_replayed_exactly(const si::envelope& e) {
        const std::string id(*e.find_header("idempotence-id"));
        BOOST_TEST_REQUIRE(replayed_records.count(id) == 1u, id << " was not replayed");
        const si::envelope& replayed = replayed_records.at(id);
        BOOST_TEST((replayed.key == e.key), id << ": key differs");
        BOOST_TEST((replayed.value == e.value), id << ": value differs");
        BOOST_TEST((replayed.headers == e.headers), id << ": headers differ");
        BOOST_TEST((replayed_messages.at(id) == e.value), id << ": decoded message differs");
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile_payloads)

BOOST_AUTO_TEST_CASE(binary_and_megabyte_payloads_are_buffered_and_replayed_byte_exact) {
    replay_bench bench;
    bench.expect_buffered_then_replayed_exactly({
        payload_second("s-1", std::string("k\0e\0y\xff", 6), all_bytes(std::size_t(1) << 20)),
        payload_second("s-2", all_bytes(std::size_t(1) << 20), std::string("v\0a\0l\xc3", 6)),
        payload_second("s-3", "", ""),
    });
}

// The traceparent column is text: a header value that is no text is stored as NULL there, and
// the replayed headers still carry it byte for byte.
BOOST_AUTO_TEST_CASE(a_traceparent_that_is_not_text_is_buffered_like_any_header) {
    replay_bench bench;
    bench.expect_buffered_then_replayed_exactly({
        payload_second("t-1", "k", "v1", "00-\xff\xfe-01"),
        payload_second("t-2", "k", "v2", std::string("00-\0-01", 6)),
    });
}

BOOST_AUTO_TEST_SUITE_END()

// ---- a store that cannot start ----

namespace {

const std::string secret = "s3cret-Pa55word";

/// A TCP port on 127.0.0.1 that is bound but not listening, so connecting is refused; held for
/// the object's life so nothing else takes it.
class refusing_port {
public:
    refusing_port() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
            throw std::runtime_error("cannot bind a port on 127.0.0.1");
        port_ = ntohs(address.sin_port);
    }
    ~refusing_port() { ::close(fd_); }
    refusing_port(const refusing_port&) = delete;
    refusing_port& operator=(const refusing_port&) = delete;

    int port() const { return port_; }

private:
    int fd_;
    int port_ = 0;
};

/// Constructing a store on `conninfo` throws one seqinbox::error of `category` whose message
/// names `fix` and, for connection errors, the redacted conninfo; never the password.
void expect_store_refused(const std::string& conninfo, si::error_category category, const std::string& fix) {
    try {
        pg::store store(pg::store_options{.conninfo = conninfo, .pool_size = 2});
        BOOST_FAIL("a store opened on " << conninfo);
    } catch (const si::error& e) {
        const std::string text = e.what();
        BOOST_TEST_MESSAGE(to_string(e.category()) << ": " << text);
        BOOST_TEST(to_string(e.category()) == to_string(category), text);
        BOOST_TEST(text.find(fix) != std::string::npos, text);
        BOOST_TEST(text.find(secret) == std::string::npos, text);
        if (category == si::error_category::connection) BOOST_TEST(text.find(pg::redact_conninfo(conninfo)) != std::string::npos, text);
    }
}

const std::string connection_fix = "check the connection string";

}  // namespace

BOOST_AUTO_TEST_SUITE(store_cannot_start)

BOOST_AUTO_TEST_CASE(server_down_at_start) {
    const refusing_port nobody;
    expect_store_refused("host=127.0.0.1 port=" + std::to_string(nobody.port()) + " dbname=x user=postgres password=" + secret +
                             " connect_timeout=10",
                         si::error_category::connection, connection_fix);
}

BOOST_AUTO_TEST_CASE(wrong_host) {
    expect_store_refused("host=/nonexistent/seqinbox/socket/dir port=5432 dbname=x user=postgres password=" + secret,
                         si::error_category::connection, connection_fix);
}

BOOST_AUTO_TEST_CASE(wrong_user_and_password) {
    const int port = pg_server::shared().port();
    expect_store_refused("host=127.0.0.1 port=" + std::to_string(port) + " dbname=postgres user=no_such_role password=" + secret,
                         si::error_category::connection, connection_fix);
}

BOOST_AUTO_TEST_CASE(wrong_database) {
    expect_store_refused(pg_server::shared().conninfo("no_such_database") + " password=" + secret, si::error_category::connection,
                         connection_fix);
}

BOOST_AUTO_TEST_CASE(malformed_connection_string) {
    expect_store_refused("host=127.0.0.1 port=not-a-port password=" + secret, si::error_category::connection, connection_fix);
    expect_store_refused("postgresql://postgres:" + secret + "@127.0.0.1:1/x?connect_timeout=10", si::error_category::connection,
                         connection_fix);
}

BOOST_AUTO_TEST_CASE(database_without_the_claim_table) {
    const std::string conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo, {.target_version = seqinbox::test::claim_table_version() - 1});
    expect_store_refused(conninfo + " password=" + secret, si::error_category::schema_mismatch, "seqinbox migrate");
}

BOOST_AUTO_TEST_CASE(database_never_migrated) {
    expect_store_refused(pg_server::shared().create_database() + " password=" + secret, si::error_category::schema_mismatch,
                         "seqinbox migrate");
}

BOOST_AUTO_TEST_SUITE_END()
