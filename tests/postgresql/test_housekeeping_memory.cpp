// The memory of a removal batch (a program of its own, so that no other test's allocations count
// in its peak): an expired instance with 300 WAITING records of 200 KB (60 MB in all) is removed
// with every record forwarded, while the process's peak resident memory grows by a bounded
// amount, one page of records (forward_page_bytes) held at a time, not the 60 MB.
#define BOOST_TEST_MODULE seqinbox postgresql housekeeping memory
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <stdexcept>
#include <string>

#include "pg_test_support.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace si = seqinbox;
namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;

namespace {

/// The process's peak resident set (VmHWM) in KiB.
long long peak_resident_kib() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
    throw std::runtime_error("no VmHWM in /proc/self/status");
}

/// Starts a new peak at the current resident set (Linux 4.0 and later).
void reset_peak_resident() { std::ofstream("/proc/self/clear_refs") << "5"; }

/// Counts what it is given and keeps nothing, as a sink that has sent it on.
struct counting_sink {
    std::size_t records = 0;
    std::size_t bytes = 0;
    void publish(const si::failed_delivery& f) {
        ++records;
        bytes += f.original.value ? f.original.value->size() : 0;
    }
};

// AddressSanitizer keeps freed memory in quarantine: the peak then says nothing of the bound.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool measured = false;
#elif defined(__has_feature)
constexpr bool measured = !__has_feature(address_sanitizer);
#else
constexpr bool measured = true;
#endif

}  // namespace

BOOST_AUTO_TEST_CASE(a_removal_batch_holds_one_page_of_records_at_a_time) {
    constexpr long long records = 300, record_bytes = 200'000;
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    soci::session s(soci::postgresql, conninfo);
    const long long id = si::test::create_instance(s, "OrderSequence", "o1");
    s << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at,"
         " cluster, topic, partition, \"offset\", value, record_time)"
         " SELECT :id, 'OrderValidated', 'v' || g, 'WAITING', now(), now(), 'c', 'orders', 0, g,"
         " decode(repeat(lpad(to_hex(g % 256), 2, '0'), :bytes), 'hex'), now() FROM generate_series(1, :records) AS g",
        soci::use(id), soci::use(record_bytes), soci::use(records);
    si::test::mark_due_for_removal(conninfo, id);

    pg::store store({.conninfo = conninfo, .pool_size = 2});
    counting_sink sink;
    si::housekeeping_options options;
    options.work_share = 1;
    si::basic_housekeeper<pg::store, counting_sink> housekeeper(store, sink, options);
    reset_peak_resident();
    const long long before = peak_resident_kib();
    const auto report = housekeeper.run_once();
    const long long growth_kib = peak_resident_kib() - before;

    BOOST_TEST(report.expired_removed == 1u);
    BOOST_TEST(report.forwarded == static_cast<std::size_t>(records));
    BOOST_TEST(sink.records == static_cast<std::size_t>(records));
    BOOST_TEST(sink.bytes == static_cast<std::size_t>(records * record_bytes));
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message") == 0);
    BOOST_TEST_MESSAGE("peak resident memory grew by " << growth_kib / 1024 << " MiB removing " << records * record_bytes / 1'000'000
                                                       << " MB of waiting records");
    // A page: its result (values as hex, twice their bytes) and its decoded records, each at
    // most forward_page_bytes plus one record; before, all 60 MB three times over.
    if (measured) BOOST_TEST(growth_kib < 32 * 1024);
}
