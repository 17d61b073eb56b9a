// The operator subcommands and `seqinbox serve` on a mariadb:// URL: read views (status,
// sequences, show), pending actions (consume, close) and the operator API's counts, against a
// throwaway mariadbd, as a user runs them.
#define BOOST_TEST_MODULE seqinbox mariadb cli operate
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "mariadb_server.hpp"
#include "postgresql/cli_runner.hpp"
#include "relay/http_client.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "support/world.hpp"

namespace mdb = seqinbox::mariadb;
namespace si = seqinbox;
using seqinbox::test::contains;
using seqinbox::test::mariadb_server;
using seqinbox::test::run_cli;
using seqinbox::test::shell_quote;

namespace {

using inbox_type = si::basic_inbox<mdb::store, si::memory::source, si::memory::error_sink>;

/// o1: OrderValidated v1, OrderPrepared p1, OrderShipped s1 waiting; o2: complete and closed.
struct populated {
    populated()
        : url(mariadb_server::shared().create_database()),
          admin(soci::mysql, mariadb_server::shared().soci_connect(mariadb_server::database_of(url))) {
        mdb::migrate(url);
        store.emplace(mdb::store_options{.url = url, .pool_size = 4});
        inbox.emplace(*store, source, sink, si::testing::order_declarations());
        for (const auto& m : inbox->declared().sequences.front().messages) inbox->on(m.qualified_type(), [](auto&&, auto&&) {});
        for (const char* type : {"OrderValidated", "OrderPrepared", "OrderShipped"}) inbox->deliver(si::testing::record(type, "x-" + std::string(type), "o1"));
        for (const char* type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
            inbox->deliver(si::testing::record(type, std::string(type) + "@o2", "o2"));
    }

    std::string with_db(const std::string& command) const { return command + " --database " + shell_quote(url); }
    long long number(const std::string& sql) {
        long long n = 0;
        admin << sql, soci::into(n);
        return n;
    }
    /// Moves o1's creation and retention `hours` into the past.
    void age_o1(int hours) {
        const auto by = " - INTERVAL " + std::to_string(hours) + " HOUR";
        admin << "UPDATE sequence_instance SET created_at = created_at" + by + ", retain_until = retain_until" + by + " WHERE context_id = 'o1'";
    }

    std::string url;
    soci::session admin;
    si::memory::source source;
    si::memory::error_sink sink;
    std::optional<mdb::store> store;
    std::optional<inbox_type> inbox;
};

/// `seqinbox serve <arguments>` as a child process, its output in `log`; killed when destroyed.
class serve_process {
public:
    serve_process(const std::string& arguments, std::filesystem::path log) : log_(std::move(log)) {
        pid_ = ::fork();
        BOOST_TEST_REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            const std::string command = "exec " + shell_quote(SEQINBOX_CLI) + " serve " + arguments;
            ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
    }
    ~serve_process() {
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
    }
    serve_process(const serve_process&) = delete;
    serve_process& operator=(const serve_process&) = delete;

    std::string log() const {
        std::ifstream in(log_);
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }
    /// The port from the start line (0: none within 30 s).
    std::uint16_t port() const {
        static const std::string marker = "console on 127.0.0.1:";
        for (int i = 0; i < 600; ++i) {
            if (const auto text = log(); text.find(marker) != std::string::npos)
                return static_cast<std::uint16_t>(std::stoi(text.substr(text.find(marker) + marker.size())));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return 0;
    }

private:
    std::filesystem::path log_;
    pid_t pid_ = -1;
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(status_and_sequences_read_the_mariadb_views, populated) {
    const auto table = run_cli(with_db("status"));
    BOOST_TEST(table.exit_code == 0, table.output);
    BOOST_TEST(contains(table.output, "OrderSequence  OPEN  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderSequence  CLOSED  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderValidated  WAITING  1"), table.output);
    BOOST_TEST(contains(table.output, "OrderValidated  PROCESSED  1"), table.output);
    const auto json = run_cli(with_db("status") + " --json");
    BOOST_TEST(contains(json.output, R"({"type": "OrderShipped", "state": "WAITING", "count": 1})"), json.output);

    BOOST_TEST(contains(run_cli(with_db("sequences --expired")).output, "0 instances"));
    age_o1(30);
    const auto expired = run_cli(with_db("sequences --expired --json"));
    BOOST_TEST(expired.exit_code == 0, expired.output);
    BOOST_TEST(contains(expired.output, R"("context_id": "o1", "state": "OPEN")"), expired.output);
}

BOOST_FIXTURE_TEST_CASE(show_and_actions_through_the_pending_action_job, populated) {
    const auto shown = run_cli(with_db("show") + " OrderSequence o1");
    BOOST_TEST(shown.exit_code == 0, shown.output);
    BOOST_TEST(contains(shown.output, "OrderValidated  x-OrderValidated  WAITING"), shown.output);
    const auto missing = run_cli(with_db("show") + " OrderSequence nope");
    BOOST_TEST(missing.exit_code == 1, missing.output);

    const auto v1 = std::to_string(number("SELECT id FROM sequenced_message WHERE idempotence_id = 'x-OrderValidated'"));
    const auto consume = run_cli(with_db("consume " + v1));
    BOOST_TEST(consume.exit_code == 0, consume.output);
    BOOST_TEST(contains(run_cli(with_db("show") + " OrderSequence o1").output, "pending CONSUME"));
    BOOST_TEST(inbox->run_pending_actions() == 1u);
    BOOST_TEST(number("SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'x-OrderValidated' AND state = 'PROCESSED'") == 1);
    const auto again = run_cli(with_db("consume " + v1));
    BOOST_TEST(again.exit_code == 1, again.output);
    BOOST_TEST(contains(again.output, "is not in a state the action takes"), again.output);

    const auto o1 = std::to_string(number("SELECT id FROM sequence_instance WHERE context_id = 'o1'"));
    BOOST_TEST(run_cli(with_db("close " + o1)).exit_code == 0);
    BOOST_TEST(inbox->run_pending_actions() == 1u);
    BOOST_TEST(number("SELECT count(*) FROM sequence_instance WHERE context_id = 'o1' AND state = 'CLOSED'") == 1);

    const auto pooled = run_cli(with_db("status") + " --pooler transaction");
    BOOST_TEST(pooled.exit_code == 1, pooled.output);
    BOOST_TEST(contains(pooled.output, "--pooler is for PostgreSQL"), pooled.output);
}

BOOST_FIXTURE_TEST_CASE(serve_answers_the_operator_api_from_mariadb, populated) {
    const auto log = std::filesystem::temp_directory_path() / ("seqinbox-serve-mariadb-" + std::to_string(::getpid()) + ".log");
    {
        serve_process serve("--database " + shell_quote(url) + " --http-port 0", log);
        const auto port = serve.port();
        BOOST_TEST_REQUIRE(port != 0, serve.log());
        const auto counts = seqinbox::test::http_get(port, "/api/v1/counts", std::chrono::seconds(10));
        BOOST_TEST(counts.status == 200, counts.body);
        BOOST_TEST(contains(counts.body, "OrderShipped"), counts.body);
        BOOST_TEST(seqinbox::test::http_get(port, "/healthz").status == 200);
    }
    std::filesystem::remove(log);
}
