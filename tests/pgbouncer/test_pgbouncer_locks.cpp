// The locks that must outlive a transaction, through PgBouncer in transaction mode with fewer
// server connections than clients: a housekeeping job runs in one service instance at a time
// (two stores, as two processes would have), and two `seqinbox migrate` at once apply each
// script once. Were a lock held by a session (an advisory lock taken outside a transaction), the
// server connection holding it would go back to PgBouncer's pool and serve the other store,
// which would then find the lock its own (session advisory locks are re-entrant).
#define BOOST_TEST_MODULE seqinbox pgbouncer locks
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pgbouncer_server.hpp"
#include "postgresql/cli_runner.hpp"
#include "postgresql/pg_test_support.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace pg = seqinbox::postgresql;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using seqinbox::test::pgbouncer_server;

namespace {

/// Four server connections, for 8 clients: a held job lock keeps one (its transaction stays
/// open), three are held at most, and the other store's tries share what is left, the
/// connections that ran the holder's lock statements among them.
pgbouncer_server& bouncer() {
    static pgbouncer_server server(pg_server::shared(), {.pool_size = 4});
    return server;
}

std::string migrated_database() {
    const auto conninfo = pg_server::shared().create_database();
    pg::migrate(conninfo);
    return conninfo;
}

pg::store_options through_bouncer(const std::string& direct) {
    pg::store_options options;
    options.conninfo = bouncer().through(direct);
    options.through = pg::pooler::transaction;
    options.pool_size = 4;
    return options;
}

const std::vector<std::string> jobs = {"seqinbox.closed_cleanup", "seqinbox.expiry_marking", "seqinbox.removal"};

}  // namespace

BOOST_AUTO_TEST_CASE(a_job_lock_held_by_one_service_instance_excludes_the_other_until_released) {
    const auto direct = migrated_database();
    pg::store first(through_bouncer(direct)), second(through_bouncer(direct));
    std::vector<pg::store::job_lock> held;
    for (const auto& job : jobs) {
        held.push_back(first.try_lock_job(job));
        BOOST_TEST(static_cast<bool>(held.back()), job);
    }
    // Many tries, transactions of the second store between them: they use every server connection.
    for (int round = 0; round < 10; ++round) {
        for (const auto& job : jobs) BOOST_TEST(!static_cast<bool>(second.try_lock_job(job)), job << " round " << round);
        auto tx = second.begin();
        tx.commit();
    }
    seqinbox::memory::error_sink sink;
    seqinbox::basic_housekeeper<pg::store, seqinbox::memory::error_sink> housekeeper(second, sink);
    const auto report = housekeeper.run_once();
    BOOST_TEST(report.skipped == (std::vector<std::string>{"closed_cleanup", "expiry_marking", "removal"}), boost::test_tools::per_element());

    held.clear();  // released: the other instance gets every job now
    for (const auto& job : jobs) BOOST_TEST(static_cast<bool>(second.try_lock_job(job)), job);
    BOOST_TEST(housekeeper.run_once().skipped.empty());
    BOOST_TEST(bouncer().transactions() > 0);
}

// A job lock holds nothing between statements (a lease row): PgBouncer's idle_transaction_timeout
// cannot take it away from its holder, and PAUSE (before a server restart) does not wait for the
// job. Held by a transaction left open, the lock was lost after the timeout (and another service
// instance ran the job beside its holder), and PAUSE waited for the whole run.
BOOST_AUTO_TEST_CASE(a_job_lock_outlives_pgbouncers_idle_transaction_timeout) {
    const pgbouncer_server strict(pg_server::shared(), {.pool_size = 2, .idle_transaction_timeout = 1});
    const auto direct = migrated_database();
    auto options = through_bouncer(direct);
    options.conninfo = strict.through(direct);
    pg::store first(options), second(options);
    auto held = first.try_lock_job("seqinbox.removal");
    BOOST_REQUIRE(static_cast<bool>(held));
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    BOOST_TEST(!static_cast<bool>(second.try_lock_job("seqinbox.removal")), "the lock was lost to the idle transaction timeout");
    BOOST_TEST(held.renew());
}

BOOST_AUTO_TEST_CASE(pgbouncer_pauses_while_a_job_lock_is_held) {
    const auto direct = migrated_database();
    pg::store first(through_bouncer(direct)), second(through_bouncer(direct));
    auto held = first.try_lock_job("seqinbox.removal");
    BOOST_REQUIRE(static_cast<bool>(held));
    BOOST_TEST(bouncer().admin_command("PAUSE", std::chrono::seconds(5)), "PAUSE completed while a job lock is held");
    BOOST_TEST(bouncer().admin_command("RESUME", std::chrono::seconds(5)));
    BOOST_TEST(held.renew());
    BOOST_TEST(!static_cast<bool>(second.try_lock_job("seqinbox.removal")));
}

namespace {

/// Starts `seqinbox migrate <arguments>`; finish() waits for it and returns what it printed.
struct migrator {
    explicit migrator(const std::string& arguments)
        : pipe(::popen((seqinbox::test::shell_quote(SEQINBOX_CLI) + " migrate " + arguments + " 2>&1").c_str(), "r")) {}

    seqinbox::test::cli_outcome finish() {
        std::string output;
        char buffer[4096];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
        const int status = ::pclose(pipe);
        return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
    }

    FILE* pipe;
};

/// The versions of the line "applied: V1, V2" (or "applied: none") of migrate's output.
std::set<int> applied_versions(const std::string& output) {
    std::set<int> versions;
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("applied: ")) continue;
        for (std::size_t at = line.find('V'); at != std::string::npos; at = line.find('V', at + 1)) versions.insert(std::stoi(line.substr(at + 1)));
    }
    return versions;
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_migrations_at_once_through_pgbouncer_apply_each_script_once) {
    const auto direct = pg_server::shared().create_database();
    const auto arguments = "--postgres " + seqinbox::test::shell_quote(bouncer().through(direct));
    migrator a(arguments), b(arguments);
    BOOST_REQUIRE(a.pipe != nullptr);
    BOOST_REQUIRE(b.pipe != nullptr);
    const auto first = a.finish(), second = b.finish();
    BOOST_TEST(first.exit_code == 0, first.output);
    BOOST_TEST(second.exit_code == 0, second.output);
    BOOST_TEST_MESSAGE("first migrator:\n" << first.output << "second migrator:\n" << second.output);

    soci::session s(soci::postgresql, direct);
    const auto latest = pg::latest_schema_version();
    BOOST_TEST(count(s, "SELECT max(version) FROM seqinbox_schema_history") == latest);
    BOOST_TEST(count(s, "SELECT count(*) FROM seqinbox_schema_history") == latest);
    BOOST_TEST(count(s, "SELECT count(DISTINCT version) FROM seqinbox_schema_history") == latest);
    // Every script applied by one of them, none by both.
    std::set<int> all;
    for (const auto& out : {first.output, second.output})
        for (int v : applied_versions(out)) BOOST_TEST(all.insert(v).second, "V" << v << " applied twice");
    BOOST_TEST(all.size() == static_cast<std::size_t>(latest));
    pg::store store(through_bouncer(direct));  // the schema checks out through PgBouncer
    BOOST_TEST(store.statistics().connections_opened >= 1u);
}
