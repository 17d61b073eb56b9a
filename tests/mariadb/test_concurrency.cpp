// The cases of tests/postgresql/concurrency_cases.hpp on MariaDB: simultaneous deliveries of one
// message, takeovers after a rollback and after KILL CONNECTION of the claim holder, and many
// deliveries (one by one and in batches) on eight threads.
#define BOOST_TEST_MODULE seqinbox mariadb concurrency
#include <boost/test/unit_test.hpp>

#include <tuple>

#include "concurrency_server.hpp"

using concurrency_server = seqinbox::test::mariadb_concurrency_server;
using routes = std::tuple<seqinbox::test::mariadb_route>;

#include "postgresql/concurrency_cases.hpp"
