// Kafka source + PostgreSQL store end to end: records of 100 contexts, out of order and
// duplicated across the partitions of a mock-cluster topic, are handled once and in order by
// two service instances sharing one throwaway PostgreSQL database, and every offset is committed.
#define BOOST_TEST_MODULE seqinbox kafka with postgresql
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include "kafka/kafka_world.hpp"
#include "postgresql/pg_test_support.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace si = seqinbox;
namespace kafka = seqinbox::kafka;
namespace pg = seqinbox::postgresql;
using si::testing::call_log;

namespace {

using pg_inbox = si::basic_inbox<pg::store, kafka::source, si::memory::error_sink>;
const std::string topic = "orders";
constexpr int partitions = 4;

struct service {
    kafka::source source;
    si::memory::error_sink sink;
    pg_inbox inbox;

    service(pg::store& store, call_log& log, const si::testing::mock_cluster& cluster)
        : source(options(cluster), si::testing::order_declarations(), topic),
          inbox(store, source, sink, si::testing::order_declarations()) {
        si::testing::record_all(inbox, log);
    }

    static kafka::source_options options(const si::testing::mock_cluster& cluster) {
        kafka::source_options o;
        o.clusters = {{"", si::testing::consumer_properties(cluster.bootstraps(), "postgres-e2e")}};
        o.report = [](std::string_view) {};
        return o;
    }
};

}  // namespace

BOOST_AUTO_TEST_CASE(out_of_order_duplicated_records_through_kafka_into_postgresql_are_handled_once_in_order) {
    const std::string conninfo = si::test::pg_server::shared().create_database();
    pg::migrate(conninfo);
    pg::store store({.conninfo = conninfo, .pool_size = 8});

    si::testing::mock_cluster cluster;
    cluster.create_topic(topic, partitions);
    const si::testing::order_workload work(100, 0.3, 11);
    work.produce(cluster, topic, partitions, 12);

    call_log log;
    service first(store, log, cluster), second(store, log, cluster);  // two members of one group
    si::testing::committed_watch committed(cluster, "postgres-e2e", topic, partitions);
    si::testing::consumers threads;
    threads.run<pg_inbox>({&first.inbox, &second.inbox}, 2, [&] { return log.size() >= work.logical && committed.reached(); }, std::chrono::seconds(90));
    first.source.close();
    second.source.close();

    si::testing::expect_once_in_order(log, work);
    BOOST_TEST(first.sink.size() + second.sink.size() == 0u);
    soci::session db(soci::postgresql, conninfo);
    BOOST_TEST(si::test::count(db, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") ==
               static_cast<long long>(work.logical));
    // one instance per order, still open: an order is either prepared or expedited, never both
    BOOST_TEST(si::test::count(db, "SELECT count(*) FROM sequence_instance WHERE state = 'OPEN'") ==
               static_cast<long long>(work.contexts.size()));
    BOOST_TEST(si::test::count(db, "SELECT count(*) FROM sequential_inbox_idempotence") == static_cast<long long>(work.logical));
    BOOST_TEST_MESSAGE("records " << work.records.size() << ", first polled " << first.source.statistics().polled
                                  << ", second polled " << second.source.statistics().polled);
}
