// The conformance suite (tests/conformance/) instantiated for the in-memory backend.
#define BOOST_TEST_MODULE conformance_memory
#include <boost/test/unit_test.hpp>

#include <boost/mpl/list.hpp>

#include "memory_backend.hpp"

using backends = boost::mpl::list<seqinbox::conformance::memory_backend>;

#include "conformance/behaviour.hpp"
#include "conformance/batch_behaviour.hpp"
#include "conformance/buffer_behaviour.hpp"
#include "conformance/numbered_store_behaviour.hpp"
#include "conformance/numbered_behaviour.hpp"
#include "conformance/view_behaviour.hpp"
#include "conformance/housekeeping_behaviour.hpp"
#include "conformance/action_behaviour.hpp"
#include "conformance/action_requests.hpp"
#include "conformance/concurrency_behaviour.hpp"
