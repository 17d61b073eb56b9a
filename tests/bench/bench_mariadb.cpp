// bench_mariadb: deliveries/s of the inbox on the MariaDB store, against a baseline running the
// minimal claim SQL on the same server in the same run, and the round trips one delivery costs.
// The workload is bench_postgres's (tests/bench/inbox_workers.hpp): a three-type chain, each
// context delivered in declared order one by one, or in batches of batch_size records.
//
//   bench_mariadb --url mariadb://user:pw@host:port/db [--seconds N | --deliveries N] [--rounds N] [--quick]
//   bench_mariadb --throwaway-server [...]
//       starts a throwaway mariadbd (tests/mariadb) with InnoDB's durable default,
//       innodb_flush_log_at_trx_commit = 1 (every commit waits for the redo log's flush), as
//       users run it; the output says so (server_innodb_flush_log_at_trx_commit, durable_commits).
//
// The baseline, on as many threads (one session each, SOCI's MySQL backend): per message BEGIN,
// the store's claim insert (INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING claim_token) of a
// fresh key of a random existing instance, COMMIT: 3 round trips and one durable commit. Per
// batch: BEGIN, one claim insert of batch_size keys, COMMIT. It stores no message row, where the
// inbox stores a PROCESSED row per delivery in a transaction of its own (a second commit).
// Per delivery and per store call, the round trips (rt_<call>) and microseconds (us_<call>) of a
// one-thread run, as bench_postgres prints them: t1_ is the claim transaction, t2_ the transaction
// of its own that stores the PROCESSED row. Each thread count runs --rounds rounds (default 5), a round being the inbox then the baseline
// for --seconds seconds each (default 3) or --deliveries deliveries; figures are medians, ratios
// (inbox_vs_baseline_N, batch_vs_baseline_N) medians of the per-round ratios. --quick: one round
// of 60 deliveries, for the CTest smoke run.
//
// --url names a server and a database used only to connect: the program creates a database of
// its own there, migrates it and drops it at the end, also on failure. Prints `name value` lines;
// exits non-zero when the run is not correct (a delivery not PROCESSED, a listener call missing,
// a row, claim or instance count that differs from what was delivered, a baseline claim lost).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>

#include "bench/bench_support.hpp"
#include "bench/inbox_workers.hpp"
#include "bench/traced_store.hpp"
#include "mariadb/mariadb_server.hpp"
#include "seqinbox/mariadb/migrate.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace {

namespace bench = seqinbox::bench;
namespace maria = seqinbox::mariadb;
using bench::batch_size;
using bench::check_failed;
using bench::median;
using bench::print;
using bench::require;
using bench::tally;
using bench::unit;

std::string percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

/// SOCI's MySQL connection string for the server of `url` (mariadb://user[:pw]@host[:port]/db)
/// and database `db` ("" for none). The store parses the url itself; this is for the baseline.
std::string soci_connect(const std::string& url, const std::string& db) {
    const std::string_view scheme = "mariadb://";
    const std::string_view rest = std::string_view(url).substr(url.starts_with(scheme) ? scheme.size() : url.size());
    const auto at = rest.rfind('@', rest.find('/'));
    const auto slash = rest.find('/');
    if (!url.starts_with(scheme) || at == std::string_view::npos || slash == std::string_view::npos || slash < at)
        throw std::invalid_argument("--url needs the form mariadb://user[:password]@host[:port]/database");
    const std::string_view user_info = rest.substr(0, at), host_port = rest.substr(at + 1, slash - at - 1);
    const auto colon = user_info.find(':'), port_colon = host_port.rfind(':');
    std::string out = "host=" + std::string(host_port.substr(0, port_colon)) +
                      " port=" + (port_colon == std::string_view::npos ? "3306" : std::string(host_port.substr(port_colon + 1))) +
                      " user=" + percent_decoded(user_info.substr(0, colon)) + " charset=utf8mb4";
    if (colon != std::string_view::npos) out += " password='" + percent_decoded(user_info.substr(colon + 1)) + "'";
    return db.empty() ? out : out + " db=" + db;
}

struct options : bench::run_length {
    std::string url;
    bool throwaway_server = false;
    bool quick = false;
    std::size_t rounds = 5;
};

constexpr const char* usage =
    "usage: bench_mariadb (--url mariadb://user:pw@host:port/db | --throwaway-server) [--seconds N | --deliveries N]"
    " [--rounds N] [--quick]\n";

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--url" && has_value) o.url = argv[++i];
        else if (arg == "--seconds" && has_value) o.seconds = bench::positive_number(arg, argv[++i]);
        else if (arg == "--deliveries" && has_value) o.deliveries = bench::positive_number(arg, argv[++i]);
        else if (arg == "--rounds" && has_value) o.rounds = bench::positive_number(arg, argv[++i]);
        else if (arg == "--quick") o.quick = true;
        else if (arg == "--throwaway-server") o.throwaway_server = true;
        else throw std::invalid_argument("unknown or incomplete argument '" + std::string(arg) + "'");
    }
    if (o.url.empty() == !o.throwaway_server) throw std::invalid_argument("give exactly one of --url and --throwaway-server");
    if (!o.url.empty()) soci_connect(o.url, "");  // refuses a url of another form, before anything starts
    if (o.quick) {
        o.rounds = 1;
        if (o.deliveries == 0) o.deliveries = 60;
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// The server and the scratch database
// ---------------------------------------------------------------------------------------------

/// A database of its own on the server of `url`, dropped by the destructor.
class scratch_database {
public:
    explicit scratch_database(const std::string& url)
        : url_(url.substr(0, url.rfind('/') + 1)),
          name_("seqinbox_bench_" + std::to_string(::getpid()) + "_" +
                std::to_string(std::chrono::system_clock::now().time_since_epoch().count())) {
        soci::session admin(soci::mysql, soci_connect(url, ""));
        admin << "CREATE DATABASE " + name_;
        url_ += name_;
    }
    scratch_database(const scratch_database&) = delete;
    scratch_database& operator=(const scratch_database&) = delete;
    ~scratch_database() {
        try {
            soci::session admin(soci::mysql, soci_connect(url_, ""));
            admin << "DROP DATABASE IF EXISTS " + name_;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_mariadb: could not drop database %s: %s\n", name_.c_str(), e.what());
        }
    }
    const std::string& url() const noexcept { return url_; }
    std::string soci() const { return soci_connect(url_, name_); }

private:
    std::string url_;
    std::string name_;
};

/// The settings that decide what a commit costs.
void print_server_settings(soci::session& db, const maria::store& store) {
    for (const std::string name : {"innodb_flush_log_at_trx_commit", "innodb_doublewrite", "sync_binlog", "log_bin"}) {
        long long value = 0;
        db << "SELECT @@" + name, soci::into(value);
        print("server_" + name, static_cast<double>(value));
    }
    print("durable_commits", store.durable_commits() ? 1.0 : 0.0);
}

// ---------------------------------------------------------------------------------------------
// The baseline: the claim's SQL alone
// ---------------------------------------------------------------------------------------------

const std::string baseline_sequence = "BaselineSequence";
const std::string baseline_type = "BaselineType";

/// 1,000 OPEN instances the baseline's claims reference (their foreign key is checked).
std::vector<long long> create_baseline_instances(soci::session& db) {
    std::string values;
    for (int i = 0; i < 1000; ++i)
        values += std::string(values.empty() ? "" : ", ") + "('" + baseline_sequence + "', 'ctx" + std::to_string(i) +
                  "', 'OPEN', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 DAY)";
    db << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until) VALUES " + values;
    std::vector<long long> ids(1000);
    db << "SELECT id FROM sequence_instance WHERE name = '" + baseline_sequence + "'", soci::into(ids);
    require(ids.size() == 1000, "baseline instances: " + std::to_string(ids.size()) + " instead of 1000");
    return ids;
}

const std::string claim_insert =
    "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at, claim_token)"
    " VALUES ";
const std::string claim_conflict = " ON DUPLICATE KEY UPDATE message_type = message_type RETURNING claim_token";

/// One baseline client: its own session, claiming fresh keys of random instances.
class baseline_client {
public:
    baseline_client(const scratch_database& db, const std::vector<long long>& instances, std::string prefix)
        : session_(soci::mysql, db.soci()), instances_(&instances), prefix_(std::move(prefix)),
          random_(static_cast<std::uint32_t>(std::hash<std::string>{}(prefix_))),
          single_((session_.prepare << claim_insert + "('" + baseline_type + "', :id, :instance, UTC_TIMESTAMP(6), :token)" +
                                           claim_conflict,
                   soci::use(id_), soci::use(instance_), soci::use(token_), soci::into(returned_))) {
        session_ << "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";  // as the store's sessions
    }

    /// BEGIN, one claim, COMMIT.
    void claim_one() {
        next_key();
        session_.begin();
        single_.execute(true);
        session_.commit();
        require(returned_ == token_, "baseline claim " + id_ + " was not won");
        ++rows_;
    }

    /// BEGIN, one claim insert of batch_size keys, COMMIT.
    void claim_batch() {
        std::string values;
        for (std::size_t i = 0; i < batch_size; ++i) {
            next_key();
            values += (values.empty() ? "('" : ", ('") + baseline_type + "', '" + id_ + "', " + std::to_string(instance_) +
                      ", UTC_TIMESTAMP(6), " + std::to_string(token_) + ")";
        }
        session_.begin();
        const soci::rowset<soci::row> claimed = (session_.prepare << claim_insert + values + claim_conflict);
        const auto won = std::count_if(claimed.begin(), claimed.end(), [](const soci::row&) { return true; });
        session_.commit();
        require(static_cast<std::size_t>(won) == batch_size, "baseline batch: " + std::to_string(won) + " claims returned");
        rows_ += batch_size;
    }

    std::size_t rows() const noexcept { return rows_; }

private:
    void next_key() {
        id_ = prefix_ + "-" + std::to_string(++token_);
        instance_ = (*instances_)[random_() % instances_->size()];
    }

    soci::session session_;
    const std::vector<long long>* instances_;
    std::string prefix_;
    std::minstd_rand random_;
    std::string id_;
    long long instance_ = 0;
    long long token_ = 0;
    long long returned_ = 0;
    std::size_t rows_ = 0;
    soci::statement single_;
};

/// Rows claimed per second by `threads` baseline clients, each transaction claiming one row or a
/// batch; `claimed` accumulates every row for the final verification.
double measure_baseline(const scratch_database& db, const std::vector<long long>& instances, std::size_t threads, unit how,
                        const std::string& run_name, const options& o, std::size_t& claimed) {
    std::vector<std::unique_ptr<baseline_client>> clients;
    for (std::size_t i = 0; i < threads; ++i)
        clients.push_back(std::make_unique<baseline_client>(db, instances, run_name + "-c" + std::to_string(i)));
    const std::size_t per_transaction = how == unit::batch ? batch_size : 1;
    const std::size_t transactions = (o.deliveries + threads * per_transaction - 1) / (threads * per_transaction);
    const auto deadline = bench::clock_type::now() + std::chrono::seconds(o.seconds);
    std::vector<std::exception_ptr> failures(threads);
    const auto started = bench::clock_type::now();
    {
        std::vector<std::jthread> running;
        for (std::size_t i = 0; i < threads; ++i)
            running.emplace_back([&, i] {
                try {
                    for (std::size_t n = 0; o.deliveries == 0 ? bench::clock_type::now() < deadline : n < transactions; ++n)
                        how == unit::batch ? clients[i]->claim_batch() : clients[i]->claim_one();
                } catch (...) {
                    failures[i] = std::current_exception();
                }
            });
    }
    const double seconds = bench::elapsed_s(started, bench::clock_type::now());
    for (const auto& f : failures)
        if (f) std::rethrow_exception(f);
    std::size_t rows = 0;
    for (const auto& c : clients) rows += c->rows();
    claimed += rows;
    return static_cast<double>(rows) / seconds;
}

// ---------------------------------------------------------------------------------------------
// The comparison and the verification
// ---------------------------------------------------------------------------------------------

struct bench_state {
    const options& o;
    const scratch_database& db;
    maria::store& store;
    std::vector<long long> instances;
    tally total;                     ///< everything the inbox delivered
    std::size_t baseline_rows = 0;  ///< every claim of the baseline
};

/// `o.rounds` rounds of the inbox with `threads` threads delivering by `how`, each followed by
/// the baseline with as many clients. Prints the medians; returns the inbox's round trips per
/// delivery and its median rate.
std::pair<double, double> compare(bench_state& s, unit how, std::size_t threads) {
    const std::string batch = how == unit::batch ? "_batch" : "";
    const std::string suffix = "_" + std::to_string(threads);
    std::vector<double> inbox_rates, baseline_rates, ratios;
    tally delivered;
    std::uint64_t round_trips = 0;
    for (std::size_t round = 0; round < s.o.rounds; ++round) {
        const std::string name = "r" + batch + suffix + "-" + std::to_string(round);
        const bench::run_result inbox = bench::measure_inbox(s.store, threads, name, s.o, s.total, how);
        bench::require_all_processed(inbox, name);
        delivered += inbox.done;
        round_trips += inbox.round_trips;
        inbox_rates.push_back(inbox.deliveries_per_s());
        baseline_rates.push_back(measure_baseline(s.db, s.instances, threads, how, "b" + name, s.o, s.baseline_rows));
        ratios.push_back(inbox_rates.back() / baseline_rates.back());
    }
    const std::string ratio = how == unit::batch ? "batch_vs_baseline" : "inbox_vs_baseline";
    print("deliveries" + batch + suffix, static_cast<double>(delivered.deliveries));
    print("deliveries_per_s" + batch + suffix, median(inbox_rates));
    print((how == unit::batch ? "baseline_batch_rows_per_s" : "baseline_per_s") + suffix, median(baseline_rates));
    print(ratio + suffix, median(ratios));
    print(ratio + "_min" + suffix, std::ranges::min(ratios));
    print(ratio + "_max" + suffix, std::ranges::max(ratios));
    const double per_delivery =
        static_cast<double>(round_trips) / static_cast<double>(delivered.deliveries + delivered.duplicates);
    return {per_delivery, median(inbox_rates)};
}

void require_count(soci::session& db, const std::string& what, const std::string& query, std::size_t expected) {
    long long n = -1;
    db << query, soci::into(n);
    require(n == static_cast<long long>(expected), what + ": " + std::to_string(n) + " instead of " + std::to_string(expected));
}

/// Everything the inbox delivered is PROCESSED once, claimed once, every instance CLOSED; every
/// baseline claim is stored.
void verify_committed_state(soci::session& db, const bench_state& s) {
    std::string types;
    for (const auto& type : bench::chain_types) types += (types.empty() ? "('" : ", '") + type + "'";
    types += ")";
    const std::size_t deliveries = s.total.deliveries;
    require_count(db, "PROCESSED rows",
                  "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED' AND message_type IN " + types, deliveries);
    require_count(db, "rows not PROCESSED",
                  "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED' AND message_type IN " + types, 0);
    require_count(db, "distinct stored messages",
                  "SELECT count(DISTINCT message_type, idempotence_id) FROM sequenced_message WHERE message_type IN " + types,
                  deliveries);
    require_count(db, "claims", "SELECT count(*) FROM sequential_inbox_idempotence WHERE message_type IN " + types, deliveries);
    require_count(db, "instances", "SELECT count(*) FROM sequence_instance WHERE name = '" + bench::bench_sequence + "'",
                  s.total.contexts);
    require_count(db, "CLOSED instances",
                  "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED' AND name = '" + bench::bench_sequence + "'",
                  s.total.contexts);
    require_count(db, "baseline claims",
                  "SELECT count(*) FROM sequential_inbox_idempotence WHERE message_type = '" + baseline_type + "'",
                  s.baseline_rows);
}

void run(const options& o) {
    std::optional<seqinbox::test::mariadb_server> server;
    if (o.throwaway_server) server.emplace(seqinbox::test::mariadb_server::commits::durable);
    const scratch_database db(server ? server->url("mysql") : o.url);
    maria::migrate(db.url());
    soci::session session(soci::mysql, db.soci());
    maria::store store({.url = db.url(), .pool_size = 8});  // two per thread of the 4-thread run
    print_server_settings(session, store);
    // The figures are meant for servers as users run them: the throwaway one must be durable.
    require(!server || store.durable_commits(), "the throwaway server does not flush its redo log at each commit");
    bench_state s{o, db, store, create_baseline_instances(session), {}, 0};
    print("rounds", static_cast<double>(o.rounds));
    const auto [single_trips, single_rate] = compare(s, unit::context, 1);
    print("round_trips_per_delivery", single_trips);
    bench::print_breakdown(store, o.quick ? 5 : 300, s.total);
    print("round_trips_per_delivery_4", compare(s, unit::context, 4).first);
    print("baseline_round_trips_per_transaction", 3.0);  // BEGIN, the claim insert, COMMIT
    const auto [batch_trips, batch_rate] = compare(s, unit::batch, 1);
    print("round_trips_per_delivery_batch", batch_trips);
    print("batch_vs_single_1", batch_rate / single_rate);
    compare(s, unit::batch, 4);
    verify_committed_state(session, s);
    print("verified_deliveries", static_cast<double>(s.total.deliveries));
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "bench_mariadb: %s\n%s", e.what(), usage);
        return 2;
    }
    return bench::run_guarded("bench_mariadb", [&] { run(o); });
}
