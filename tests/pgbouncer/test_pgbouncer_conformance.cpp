// The conformance suite's cases of concurrent work (tests/conformance/concurrency_behaviour.hpp:
// inboxes on 8 threads, two housekeepers, two writers of one key) and the action request's
// lock_timeout, with a store that reaches the server through PgBouncer in transaction mode: 10
// server connections for a store of 24 client connections.
#define BOOST_TEST_MODULE conformance_pgbouncer
#include <boost/test/unit_test.hpp>

#include <tuple>

#include "postgresql/postgresql_backend.hpp"
#include "through_pgbouncer.hpp"

namespace {
using route = seqinbox::test::through_pgbouncer<10>;
}

using backends = std::tuple<seqinbox::conformance::basic_postgresql_backend<route>>;

#include "conformance/concurrency_behaviour.hpp"
#include "conformance/action_requests.hpp"

BOOST_AUTO_TEST_CASE(the_stores_traffic_went_through_pgbouncer) {
    const long long passed = route::bouncer().transactions();
    BOOST_TEST_MESSAGE("PgBouncer passed " << passed << " transactions");
    BOOST_TEST(passed > 0);
}
