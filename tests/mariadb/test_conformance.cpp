// The conformance suite (tests/conformance/) instantiated for the MariaDB store: single deliveries
// and batches, read views and operator actions. (Housekeeping and the concurrency cases, which need
// the housekeeping jobs, follow when the store has them.)
#define BOOST_TEST_MODULE conformance_mariadb
#include <boost/test/unit_test.hpp>

#include <boost/mpl/list.hpp>

#include "mariadb_backend.hpp"

using backends = boost::mpl::list<seqinbox::conformance::mariadb_backend>;

#include "conformance/behaviour.hpp"
#include "conformance/batch_behaviour.hpp"
#include "conformance/view_behaviour.hpp"
#include "conformance/action_behaviour.hpp"
#include "conformance/action_requests.hpp"
