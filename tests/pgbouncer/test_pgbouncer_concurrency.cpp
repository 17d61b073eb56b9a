// The claim races, takeovers and many deliveries on many threads of
// tests/postgresql/concurrency_cases.hpp through PgBouncer in transaction mode: 10 server
// connections for stores of up to 22 client connections.
#define BOOST_TEST_MODULE seqinbox pgbouncer concurrency
#include <boost/test/unit_test.hpp>

#include <tuple>

#include "postgresql/concurrency_server.hpp"
#include "through_pgbouncer.hpp"

using concurrency_server = seqinbox::test::postgresql_concurrency_server;
using routes = std::tuple<seqinbox::test::through_pgbouncer<10>>;

#include "postgresql/concurrency_cases.hpp"

BOOST_AUTO_TEST_CASE(the_stores_traffic_went_through_pgbouncer) {
    const auto& bouncer = std::tuple_element_t<0, routes>::bouncer();
    const long long passed = bouncer.transactions();
    BOOST_TEST_MESSAGE("PgBouncer passed " << passed << " transactions");
    BOOST_TEST(passed > 0);
}
