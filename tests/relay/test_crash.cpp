// The relay under crashes, on real processes: `seqinbox run` against the mock cluster and a
// durable throwaway PostgreSQL (fsync and synchronous_commit on). About 5,000 records out of order
// with duplicates; mid-stream, PostgreSQL is crashed (`pg_ctl stop -m immediate`, restarted after
// a short random pause) five times and the relay SIGKILLed twice (a new process on the same group
// takes over), in a random order. Afterwards no logical message is missing, each context's output
// is in declared order, the repeats come from at most one batch per consumer thread per crash
// (its messages and those their release passes replayed: a context each; reported per crash and
// thread, from the decision lines each thread logs), and the database holds no PROCESSED message
// without its claim, no WAITING message whose release condition is met, and no message or claim
// in an instance of another context.
// SEQINBOX_CRASH_SEED=N repeats a run's workload and crash plan (timing still varies); a failing
// run (any run with SEQINBOX_CRASH_KEEP set) keeps its relay logs, server log, rows, input records
// and repeats in a directory it names.
#define BOOST_TEST_MODULE seqinbox relay crash
#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "relay/crash_checks.hpp"
#include "relay/relay_process.hpp"
#include "relay/relay_world.hpp"
#include "seqinbox/logger/utc_time.hpp"
#include "seqinbox/yaml/loader.hpp"

namespace si = seqinbox;
using namespace seqinbox::test;

namespace {

constexpr int consumer_threads = 4;
/// Small batches keep the bound on repeats (a batch per consumer thread per crash) meaningful.
constexpr int batch_size = 10;
constexpr int database_crashes = 5;
constexpr int relay_kills = 2;
constexpr int crashes = database_crashes + relay_kills;

enum class crash { database, relay };

/// The crashes in a random order.
std::vector<crash> crash_plan(std::mt19937_64& rng) {
    std::vector<crash> plan(database_crashes, crash::database);
    plan.insert(plan.end(), relay_kills, crash::relay);
    std::shuffle(plan.begin(), plan.end(), rng);
    return plan;
}

/// 1,100 contexts: about 5,000 records (fewer under the sanitizers, see CMakeLists.txt).
std::size_t contexts_of_this_run() {
    const char* given = std::getenv("SEQINBOX_CRASH_CONTEXTS");
    return given != nullptr ? std::stoul(given) : 1100;
}

std::uint64_t seed_of_this_run() {
    if (const char* given = std::getenv("SEQINBOX_CRASH_SEED")) return std::stoull(given);
    return std::random_device{}();
}

/// The relay as an operator's supervisor runs it: after a SIGKILL a new process joins the same group.
class supervised_relay {
public:
    supervised_relay(const relay_world& world, std::string group) : world_(&world), group_(std::move(group)) { start(); }

    void kill() { BOOST_TEST_REQUIRE(process_->stop(SIGKILL) == 128 + SIGKILL); }
    void restart() { start(); }

    bool running() { return process_->wait(std::chrono::seconds(0)) == -1; }
    /// How many relays were started: their logs are relay-1.log to relay-N.log.
    int started() const { return started_; }
    relay_process& current() { return *process_; }

    /// The last lines of the current process's log, for failure messages.
    std::string log_tail(std::size_t lines = 30) const {
        const auto text = process_->log();
        auto from = text.size();
        for (std::size_t n = 0; n <= lines && from > 0;) n += text[--from] == '\n' ? 1 : 0;
        return text.substr(from);
    }

private:
    void start() {
        process_.reset();
        auto arguments = world_->arguments(group_, consumer_threads);
        arguments.insert(arguments.end(), {"--batch-size", std::to_string(batch_size)});
        process_ = std::make_unique<relay_process>(arguments,
                                                   world_->dir / ("relay-" + std::to_string(++started_) + ".log"));
        BOOST_TEST_REQUIRE(process_->http_port() != 0, "relay " << started_ << " did not start:\n" << process_->log());
    }

    const relay_world* world_;
    std::string group_;
    int started_ = 0;
    std::unique_ptr<relay_process> process_;
};

/// Crashes the server and brings it back after `pause`, as a supervisor would.
void crash_database(pg_server& server, std::chrono::milliseconds pause) {
    server.stop();
    std::this_thread::sleep_for(pause);
    server.start();
}

/// Copies what explains a failed run (relay logs, server log, every message and claim row) to a
/// directory that outlives the test; returns it.
std::filesystem::path keep_evidence(const relay_world& world, const pg_server& server, std::uint64_t seed) {
    const auto kept = std::filesystem::temp_directory_path() / ("seqinbox-crash-test-" + std::to_string(seed));
    std::filesystem::create_directories(kept);
    std::error_code ignored;
    std::filesystem::copy(world.dir, kept, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing, ignored);
    std::filesystem::copy_file(server.directory() / "server.log", kept / "server.log",
                               std::filesystem::copy_options::overwrite_existing, ignored);
    const auto ends = world.cluster.end_offsets(input, input_partitions);
    std::ofstream inputs(kept / "input.txt");
    for (const auto& r : world.cluster.read_all(input, input_partitions, static_cast<std::size_t>(std::accumulate(ends.begin(), ends.end(), 0LL))))
        inputs << input << '/' << r.partition << '@' << r.offset << ' ' << r.find_header("idempotence-id").value_or("") << '\n';
    inputs.close();
    soci::session db(soci::postgresql, world.conninfo);
    std::ofstream rows(kept / "rows.txt");
    for (const auto& line :
         lines_of(db, "SELECT concat_ws(' ', 'instance', i.id, i.context_id, i.state, '| message', m.id, m.message_type,"
                      " m.idempotence_id, m.state, m.state_changed_at, '| claim', c.sequence_instance_id, c.created_at)"
                      " FROM sequence_instance i FULL JOIN sequenced_message m ON m.sequence_instance_id = i.id"
                      " FULL JOIN sequential_inbox_idempotence c ON c.message_type = m.message_type AND c.idempotence_id = m.idempotence_id"
                      " ORDER BY i.id, m.id"))
        rows << line << '\n';
    return kept;
}

/// Keeps the evidence when the test failed, however it ends (a failed requirement included).
class evidence_on_failure {
public:
    evidence_on_failure(const relay_world& world, const pg_server& server, std::uint64_t seed)
        : world_(world), server_(server), seed_(seed) {}
    evidence_on_failure(const evidence_on_failure&) = delete;
    evidence_on_failure& operator=(const evidence_on_failure&) = delete;
    ~evidence_on_failure() {
        namespace utf = boost::unit_test;
        if (utf::results_collector.results(utf::framework::current_test_case().p_id).passed() &&
            std::getenv("SEQINBOX_CRASH_KEEP") == nullptr)
            return;
        try {
            BOOST_TEST_MESSAGE("evidence kept in " << keep_evidence(world_, server_, seed_));
        } catch (const std::exception& e) {
            BOOST_TEST_MESSAGE("evidence only partly kept: " << e.what());
        }
    }

private:
    const relay_world& world_;
    const pg_server& server_;
    std::uint64_t seed_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(five_database_crashes_and_two_relay_kills_lose_nothing_keep_order_and_leave_a_consistent_database) {
    const auto seed = seed_of_this_run();
    BOOST_TEST_MESSAGE("seed " << seed << " (SEQINBOX_CRASH_SEED repeats it)");
    std::mt19937_64 rng(seed);
    const auto started = std::chrono::steady_clock::now();

    pg_server server(pg_server::commits::durable);
    relay_world world(server);
    const evidence_on_failure evidence(world, server, seed);
    si::testing::order_workload work(contexts_of_this_run(), 0.15, rng());
    shuffle_in_windows(work, 50);
    BOOST_TEST_MESSAGE(work.records.size() << " records, " << work.logical << " logical messages");
    work.produce(world.cluster, input, input_partitions, rng());
    const std::string group = "relay-crash";
    supervised_relay relay(world, group);

    const auto logical = static_cast<long long>(work.logical);
    const auto plan = crash_plan(rng);
    std::vector<std::vector<std::int64_t>> marks;  // the output topic's end offsets as each crash began
    std::vector<std::string> crash_ends, crash_kinds;  // when each crash was over, as the relay logs times
    for (std::size_t k = 0; k < plan.size(); ++k) {
        BOOST_TEST_REQUIRE(world.wait_for_output(logical * static_cast<long long>(k + 1) / (crashes + 2)), relay.log_tail());
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
        const auto at = world.published();
        marks.push_back(world.cluster.end_offsets(output, output_partitions));
        crash_kinds.emplace_back(plan[k] == crash::database ? "PostgreSQL" : "relay killed");
        if (plan[k] == crash::database) {
            const std::chrono::milliseconds pause(std::uniform_int_distribution<int>(100, 1500)(rng));
            crash_database(server, pause);
            crash_ends.push_back(si::logger::utc_time(std::chrono::system_clock::now()));
            BOOST_TEST_MESSAGE("crash " << k + 1 << ": PostgreSQL at " << at << " published, back after " << pause.count() << " ms");
            BOOST_TEST_REQUIRE(relay.running(), "the relay outlived the crash of its database\n" << relay.log_tail());
        } else {
            relay.kill();
            crash_ends.push_back(si::logger::utc_time(std::chrono::system_clock::now()));
            relay.restart();
            BOOST_TEST_MESSAGE("crash " << k + 1 << ": relay SIGKILLed at " << at << " published, a new one started");
        }
    }

    BOOST_TEST(world.wait_for_input_decided(group, logical), "the relay committed the end of its input within 120 s\n" << relay.log_tail());
    const std::string processed = "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'";
    BOOST_TEST(relay.current().stop(SIGTERM) == 0, relay.log_tail());

    const auto records = world.cluster.read_all(output, output_partitions, static_cast<std::size_t>(world.published()));
    expect_in_declared_order(records, work, records.size());  // repeats: see below
    std::ofstream listing(world.dir / "repeats.txt");
    expect_repeats_within_one_batch_per_thread_per_crash(
        repeats_of_each_crash(records, crash_ends, marks, publication_lines(world.dir, relay.started()), listing), crash_kinds,
        consumer_threads, batch_size);

    soci::session db(soci::postgresql, world.conninfo);
    BOOST_TEST(count(world.conninfo, processed) == logical);
    BOOST_TEST(count(world.conninfo, "SELECT count(*) FROM sequenced_message") == logical, "one row per logical message");
    const auto unclaimed = processed_without_their_claim(db);
    BOOST_TEST(unclaimed.empty(), unclaimed.size() << " PROCESSED messages without their claim:" << listed(unclaimed));
    const auto decls = si::yaml::load_string<std::string>(declarations_yaml, "orders.yaml", si::yaml::registry<std::string>{});
    const auto stuck = waiting_though_released(db, decls);
    BOOST_TEST(stuck.empty(), stuck.size() << " WAITING messages whose condition is met:" << listed(stuck));
    std::map<std::string, std::string> context_of;
    for (const auto& r : work.records) context_of[std::string(r.find_header("idempotence-id").value_or(""))] = r.key.value_or("");
    const auto misplaced = in_another_context(db, context_of);
    BOOST_TEST(misplaced.empty(), misplaced.size() << " rows in an instance of another context:" << listed(misplaced));

    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
    BOOST_TEST_MESSAGE(records.size() << " output records for " << work.logical << " logical messages, " << seconds << " s");
}

BOOST_AUTO_TEST_CASE(the_database_check_finds_each_kind_of_inconsistency) {
    const auto conninfo = pg_server::shared().create_database();
    si::postgresql::migrate(conninfo);
    soci::session db(soci::postgresql, conninfo);
    const auto a = create_instance(db, "OrderSequence", "order-a");
    const auto b = create_instance(db, "OrderSequence", "order-b");
    const auto store = [&](long long instance, const std::string& type, const std::string& context, const std::string& state,
                           bool claimed) {
        const std::string id = type + "@" + context;
        db << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
              " VALUES (:i, :t, :id, :s, now(), now())",
            soci::use(instance), soci::use(type), soci::use(id), soci::use(state);
        if (claimed)
            db << "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
                  " VALUES (:t, :id, :i, now())",
                soci::use(type), soci::use(id), soci::use(instance);
    };
    store(a, "OrderCreated", "order-a", "PROCESSED", true);
    store(a, "OrderValidated", "order-a", "PROCESSED", false);  // its claim is missing
    store(a, "OrderPrepared", "order-a", "WAITING", true);      // its predecessor is PROCESSED
    store(a, "OrderShipped", "order-a", "WAITING", true);       // rightly waits for OrderPrepared
    store(a, "OrderCreated", "order-b", "PROCESSED", true);     // in order-a's instance
    store(b, "OrderValidated", "order-b", "WAITING", true);     // rightly waits: its OrderCreated is elsewhere
    const std::map<std::string, std::string> context_of{
        {"OrderCreated@order-a", "order-a"},  {"OrderValidated@order-a", "order-a"}, {"OrderPrepared@order-a", "order-a"},
        {"OrderShipped@order-a", "order-a"},  {"OrderCreated@order-b", "order-b"},   {"OrderValidated@order-b", "order-b"}};
    const auto decls = si::yaml::load_string<std::string>(declarations_yaml, "orders.yaml", si::yaml::registry<std::string>{});

    const auto instance_a = " in instance " + std::to_string(a);
    BOOST_TEST(processed_without_their_claim(db) ==
                   std::vector<std::string>{"OrderValidated/OrderValidated@order-a PROCESSED" + instance_a + ", claim: none"},
               boost::test_tools::per_element());
    BOOST_TEST(waiting_though_released(db, decls) ==
                   std::vector<std::string>{"OrderPrepared/OrderPrepared@order-a WAITING" + instance_a + ", its condition met"},
               boost::test_tools::per_element());
    BOOST_TEST(in_another_context(db, context_of) ==
                   (std::vector<std::string>{"sequenced_message OrderCreated@order-b" + instance_a + " of context order-a",
                                             "sequential_inbox_idempotence OrderCreated@order-b" + instance_a + " of context order-a"}),
               boost::test_tools::per_element());
}
