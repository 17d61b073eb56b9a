// The cases of concurrency_cases.hpp on direct connections to the throwaway server.
#define BOOST_TEST_MODULE seqinbox postgresql concurrency
#include <boost/test/unit_test.hpp>

#include <tuple>

#include "concurrency_server.hpp"
#include "store_route.hpp"

using concurrency_server = seqinbox::test::postgresql_concurrency_server;
using routes = std::tuple<seqinbox::test::direct_route>;

#include "concurrency_cases.hpp"
