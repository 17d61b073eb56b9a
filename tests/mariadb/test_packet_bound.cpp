// The MariaDB store against the server's max_allowed_packet (issue 37): every value travels as a
// hex literal in the SQL text, and the store sends several statements per query, so a large batch
// (thousands of keys with long ids) or a large record could make one query larger than the server
// accepts. The throwaway server runs with the default max_allowed_packet (16 MB), as users' do.
#define BOOST_TEST_MODULE mariadb packet bound
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "conformance/harness.hpp"
#include "mariadb_backend.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox {

// So that BOOST_TEST prints what it compares.
inline std::ostream& operator<<(std::ostream& out, error_category c) { return out << to_string(c); }
inline std::ostream& operator<<(std::ostream& out, outcome o) { return out << to_string(o); }
inline std::ostream& operator<<(std::ostream& out, failure_kind k) { return out << to_string(k); }

}  // namespace seqinbox

namespace si = seqinbox;
using fixture = si::conformance::mariadb_backend;
using harness = si::conformance::harness<fixture>;

namespace {

constexpr std::size_t megabyte = 1024 * 1024;

/// An idempotence id of `length` bytes, distinct per `n`.
std::string long_id(std::size_t n, std::size_t length = 1000) {
    std::string id = "id-" + std::to_string(n) + "-";
    id.resize(length, 'x');
    return id;
}

long long count(fixture& f, const std::string& sql) {
    long long n = 0;
    f.inspection() << sql, soci::into(n);
    return n;
}

/// What deliver threw: its category and text (internal and "" when nothing was thrown).
struct failure {
    si::error_category category = si::error_category::internal;
    std::string what;
};

template <class Work>
failure failure_of(Work work) {
    try {
        work();
    } catch (const si::error& e) {
        return {e.category(), e.what()};
    }
    return {};
}

/// The server's max_allowed_packet at `bytes` for sessions opened while this lives; the default after.
struct small_packets {
    small_packets(fixture& f, long long bytes) : f(f) { f.inspection() << "SET GLOBAL max_allowed_packet = " + std::to_string(bytes); }
    ~small_packets() { f.inspection() << "SET GLOBAL max_allowed_packet = 16777216"; }
    small_packets(const small_packets&) = delete;
    small_packets& operator=(const small_packets&) = delete;
    fixture& f;
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_throwaway_server_runs_with_the_default_max_allowed_packet) {
    fixture f;
    BOOST_TEST(count(f, "SELECT @@max_allowed_packet") == static_cast<long long>(16 * megabyte));
}

// 3,000 keys with 1,000-byte ids: their claim, the lock of their instances and the read of their
// rows make 18 MB of SQL. Before, the claim's query was larger than max_allowed_packet and the
// batch failed with a lost connection, every time.
BOOST_AUTO_TEST_CASE(a_batch_of_thousands_of_keys_with_long_ids_is_decided) {
    fixture f;
    harness h(f);
    std::vector<si::envelope> records;
    for (std::size_t i = 0; i < 3000; ++i) records.push_back(si::testing::record("OrderCreated", long_id(i), "c-" + std::to_string(i)));
    const auto results = h.inbox->deliver_batch(records);
    BOOST_TEST_REQUIRE(results.size() == records.size());
    std::size_t processed = 0;
    for (const auto& r : results) processed += r.outcome == si::outcome::processed ? 1 : 0;
    BOOST_TEST(processed == records.size());
    BOOST_TEST(count(f, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 3000);
    // Again: every claim lost, each a duplicate.
    std::size_t duplicates = 0;
    for (const auto& r : h.inbox->deliver_batch(records)) duplicates += r.outcome == si::outcome::duplicate ? 1 : 0;
    BOOST_TEST(duplicates == records.size());
    BOOST_TEST(f.store.statistics().connections_replaced == 0u);
}

// The same paths in many parts: on a server whose max_allowed_packet is 16 KB, 300 keys with
// 1,000-byte ids are claimed in parts, their rows read in parts, and the read of the released
// messages' waiting rows too.
BOOST_AUTO_TEST_CASE(a_batch_is_decided_in_parts_under_a_small_max_allowed_packet) {
    fixture f;
    const small_packets scope(f, 16384);
    si::mariadb::store store(si::conformance::detail::mariadb_fixture_options(f.url));  // its sessions see 16 KB
    fixture::inbox_type<> inbox(store, f.source, f.error_sink, si::testing::order_declarations(), {.clock = f.clock});
    si::testing::call_log log;
    si::conformance::listen(inbox, log, {});
    std::vector<si::envelope> validated, created;
    for (std::size_t i = 0; i < 300; ++i) {
        const std::string context = "c-" + std::to_string(i);
        validated.push_back(si::testing::record("OrderValidated", long_id(i), context));
        created.push_back(si::testing::record("OrderCreated", long_id(i + 1000), context));
    }
    for (const auto& r : inbox.deliver_batch(validated)) BOOST_TEST(r.outcome == si::outcome::buffered);
    const auto before = store.statistics().round_trips;
    for (const auto& r : inbox.deliver_batch(created)) {
        BOOST_TEST(r.outcome == si::outcome::processed);
        BOOST_TEST(r.released == 1u);
    }
    BOOST_TEST_MESSAGE("a batch of 300 under 16 KB packets: " << store.statistics().round_trips - before << " round trips");
    BOOST_TEST(log.calls().size() == 600u);
    BOOST_TEST(count(f, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 600);
    for (const auto& r : inbox.deliver_batch(created)) BOOST_TEST(r.outcome == si::outcome::duplicate);
    BOOST_TEST(store.statistics().connections_replaced == 0u);
}

// 24 records of 1 MB buffered WAITING in one batch, then released by the next: 48 MB of hex over
// the batch, each row's statement well within a packet.
BOOST_AUTO_TEST_CASE(a_batch_buffering_records_with_large_payloads_is_decided) {
    fixture f;
    harness h(f);
    std::vector<si::envelope> validated, created;
    for (std::size_t i = 0; i < 24; ++i) {
        const std::string context = "c-" + std::to_string(i);
        validated.push_back(si::testing::record("OrderValidated", "v-" + std::to_string(i), context, std::string(megabyte, 'v')));
        created.push_back(si::testing::record("OrderCreated", "c-" + std::to_string(i), context));
    }
    for (const auto& r : h.inbox->deliver_batch(validated)) BOOST_TEST(r.outcome == si::outcome::buffered);
    for (const auto& r : h.inbox->deliver_batch(created)) {
        BOOST_TEST(r.outcome == si::outcome::processed);
        BOOST_TEST(r.released == 1u);
    }
    BOOST_TEST(count(f, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 48);
    BOOST_TEST(f.store.statistics().connections_replaced == 0u);
}

// A record of 7 MB fits in a packet as 14 MB of hex: buffered, then released with its bytes.
BOOST_AUTO_TEST_CASE(a_record_of_seven_megabytes_is_buffered_and_released) {
    fixture f;
    std::size_t replayed_size = 0;
    harness h(f, [&](const si::testing::message& m, const auto& ctx) {
        if (ctx.replayed) replayed_size = m.size();
    });
    const auto buffered = h.deliver(si::testing::record("OrderValidated", "v-big", "c-big", std::string(7 * megabyte, 'v')));
    BOOST_TEST(buffered.outcome == si::outcome::buffered);
    const auto released = h.deliver("OrderCreated", "c-big", "c-big");
    BOOST_TEST(released.released == 1u);
    BOOST_TEST(replayed_size == 7 * megabyte);
}

// A record of 9 MB is 18 MB of hex: no query can carry it. Buffering it must fail the message as
// what it is, a record the store cannot keep: FAILED (without its record, so retryable once the
// server allows more), the error sink told why with the sizes, the delivery decided (acknowledged).
// Before, the server refused the query and closed the connection; then the store refused it as a
// bad message: either way the delivery failed, to be redelivered forever.
BOOST_AUTO_TEST_CASE(a_record_too_large_to_buffer_fails_the_message_and_is_decided) {
    fixture f;
    harness h(f);
    si::delivery_result result;
    const auto thrown = failure_of(
        [&] { result = h.deliver(si::testing::record("OrderValidated", "v-huge", "c-huge", std::string(9 * megabyte, 'v'))); });
    BOOST_TEST_REQUIRE(thrown.what.empty(), thrown.what);
    BOOST_TEST(result.outcome == si::outcome::failed);
    BOOST_TEST_REQUIRE(f.error_sink.size() == 1u);
    const auto failed = f.error_sink.records().front();
    BOOST_TEST_MESSAGE("a 9 MB record: " << failed.reason);
    BOOST_TEST(failed.kind == si::failure_kind::unstorable_key);
    BOOST_TEST(failed.reason.find("v-huge") != std::string::npos, failed.reason);
    BOOST_TEST(failed.reason.find("max_allowed_packet") != std::string::npos, failed.reason);
    BOOST_TEST(count(f, "SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'v-huge' AND state = 'FAILED'"
                        " AND record_value IS NULL") == 1);
    BOOST_TEST(count(f, "SELECT count(*) FROM sequential_inbox_idempotence WHERE idempotence_id = 'v-huge'") == 0);  // a resend retries
    BOOST_TEST(f.store.statistics().connections_replaced == 0u);
    BOOST_TEST(h.deliver("OrderCreated", "c-next", "c-next").outcome == si::outcome::processed);
}

// In a batch: the record too large to buffer fails alone, the others are decided with it.
BOOST_AUTO_TEST_CASE(a_record_too_large_to_buffer_fails_alone_in_its_batch) {
    fixture f;
    harness h(f);
    const std::vector<si::envelope> records{si::testing::record("OrderValidated", "v-small", "c-small"),
                                            si::testing::record("OrderValidated", "v-huge", "c-huge", std::string(9 * megabyte, 'v')),
                                            si::testing::record("OrderCreated", "c-other", "c-other")};
    std::vector<si::delivery_result> results;
    const auto thrown = failure_of([&] { results = h.inbox->deliver_batch(records); });
    BOOST_TEST_REQUIRE(thrown.what.empty(), thrown.what);
    BOOST_TEST_REQUIRE(results.size() == 3u);
    BOOST_TEST(results[0].outcome == si::outcome::buffered);
    BOOST_TEST(results[1].outcome == si::outcome::failed);
    BOOST_TEST(results[2].outcome == si::outcome::processed);
    BOOST_TEST_REQUIRE(f.error_sink.size() == 1u);
    BOOST_TEST(f.error_sink.records().front().kind == si::failure_kind::unstorable_key);
    BOOST_TEST(count(f, "SELECT count(*) FROM sequenced_message WHERE state = 'WAITING'") == 1);
}

// A record refused under a small max_allowed_packet is buffered when it comes again after the
// server's limit was raised, by the same store: sessions keep the limit they were opened with, so
// the store reads the server's again before refusing, and replaces its sessions opened before.
BOOST_AUTO_TEST_CASE(a_record_refused_for_its_size_is_buffered_when_resent_after_a_raise) {
    fixture f;
    const small_packets scope(f, 2097152);
    si::mariadb::store store(si::conformance::detail::mariadb_fixture_options(f.url));  // its sessions see 2 MB
    fixture::inbox_type<> inbox(store, f.source, f.error_sink, si::testing::order_declarations(), {.clock = f.clock});
    si::testing::call_log log;
    si::conformance::listen(inbox, log, {});
    const auto big = si::testing::record("OrderValidated", "v-big", "c-big", std::string(1536 * 1024, 'v'));  // 3 MB of hex
    BOOST_TEST(inbox.deliver(big).outcome == si::outcome::failed);
    f.inspection() << "SET GLOBAL max_allowed_packet = 16777216";
    BOOST_TEST(inbox.deliver(big).outcome == si::outcome::buffered);
    BOOST_TEST(inbox.deliver(si::testing::record("OrderCreated", "c-big", "c-big")).released == 1u);
    BOOST_TEST(log.calls().size() == 2u);
}
