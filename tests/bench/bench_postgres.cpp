// bench_postgres: deliveries/s of the inbox on the PostgreSQL backend, against pgbench running
// the minimal SQL of one delivery (claim insert + sequenced-message insert + commit) on the same
// server in the same run, and the SQL round trips one delivery costs.
//
//   bench_postgres --conninfo CONNINFO [--seconds N | --deliveries N] [--rounds N] [--preload N] [--quick]
//   bench_postgres --throwaway-server [--fast-commits] [...]
//       starts a throwaway PostgreSQL 15 (tests/postgresql) with PostgreSQL's durable defaults:
//       fsync and synchronous_commit on, so that a commit costs what it costs in production (the
//       target is framed by the commits per delivery). --fast-commits turns both off, as for tests.
//
// The machine is shared and noisy: each client count runs --rounds rounds (default 5), a round
// being the inbox then pgbench for --seconds seconds each (default 3) or --deliveries deliveries.
// Figures are medians over the rounds; inbox_vs_pgbench_N is the median of the per-round ratios,
// so that both sides of a ratio ran under the same load. --quick is one round of 60 deliveries,
// for the CTest smoke run.
// Batches (deliver_batch, batch_size records of whole contexts): deliveries_per_s_batch_N with N
// threads, against pgbench running the batched SQL by hand (one unnest claim insert of
// batch_size keys, one unnest insert of as many rows, commit) at N clients: its rows/s is
// pgbench_batch_rows_per_s_N. The batch workload: every other context in reverse declared order
// (buffered, then released within the batch), every fifth message sent twice (a duplicate to
// skip). --preload N also measures the one-thread batch figure on a second database of the same
// server holding N claims and N PROCESSED messages of another sequence, in rounds alternating
// with the empty database: deliveries_per_s_batch_1_preloaded, and preloaded_vs_empty_batch_1
// (median of the per-round ratios).
// --through-pgbouncer (with --throwaway-server) measures instead the batch figures at 1 and 4
// threads through a throwaway PgBouncer in transaction mode (store pooler::transaction, 6 server
// connections for the store's 8 clients) against direct connections, round by round on the same
// database: batch_deliveries_per_s_direct_N, batch_deliveries_per_s_pgbouncer_N and
// pgbouncer_vs_direct_N (median of the per-round ratios).
// Besides the figures it prints, per delivery and per store call, the round trips (rt_<call>)
// and microseconds (us_<call>) of a one-thread run: t1_ is the claim transaction, t2_ the
// requires_new transaction that stores the PROCESSED row.
//
// CONNINFO names a maintenance database; the program creates a database of its own there, migrates
// it, and drops it at the end, also on failure. Workload: a chain sequence (BenchCreated, then
// BenchValidated, then BenchShipped), each context delivered in declared order, so every delivery
// is released at once and the instance closes with the third one: the common case of a consumer
// reading a partition in order. One inbox per thread, all sharing one store; listeners do nothing.
//
// Prints one `name value` pair per line, starting with server_fsync and server_synchronous_commit
// (1 on, 0 off) of the server measured. Exits non-zero when the run is not correct: a delivery
// not PROCESSED, a listener call missing, a row or claim count that differs from the deliveries,
// an instance left OPEN, or pgbench failing.
#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <thread>
#include <utility>
#include <vector>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench/inbox_workers.hpp"
#include "bench/pg_settings.hpp"
#include "bench/traced_store.hpp"
#include "pgbouncer/pgbouncer_server.hpp"
#include "postgresql/pg_test_support.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#include "seqinbox/postgresql/pooler.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "support/world.hpp"

namespace {

namespace pg = seqinbox::postgresql;
using seqinbox::test::count;

using seqinbox::bench::batch_size;
using seqinbox::bench::bench_sequence;
using seqinbox::bench::chain_types;
using seqinbox::bench::check_failed;
using seqinbox::bench::measure_inbox;
using seqinbox::bench::median;
using seqinbox::bench::positive_number;
using seqinbox::bench::print_breakdown;
using seqinbox::bench::print_server_settings;
using seqinbox::bench::require;
using seqinbox::bench::require_all_processed;
using seqinbox::bench::run_result;
using seqinbox::bench::tally;
using seqinbox::bench::unit;
using seqinbox::bench::worker;

void print(std::string_view name, double value) {
    std::printf("%.*s %.6g\n", static_cast<int>(name.size()), name.data(), value);
    std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct options : seqinbox::bench::run_length {
    std::string conninfo;
    bool throwaway_server = false;
    bool fast_commits = false;   ///< the throwaway server without durable commits (as for tests)
    bool quick = false;
    std::size_t rounds = 5;      ///< measured runs per figure; figures are medians
    std::size_t preload = 0;     ///< claims and messages stored before the runs
    bool through_pgbouncer = false;  ///< only the batch figures, direct against through PgBouncer
};

constexpr const char* usage =
    "usage: bench_postgres (--conninfo CONNINFO | --throwaway-server [--fast-commits]) [--seconds N | --deliveries N]"
    " [--rounds N] [--preload N] [--through-pgbouncer] [--quick]\n";

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--conninfo" && has_value)
            o.conninfo = argv[++i];
        else if (arg == "--seconds" && has_value)
            o.seconds = positive_number(arg, argv[++i]);
        else if (arg == "--deliveries" && has_value)
            o.deliveries = positive_number(arg, argv[++i]);
        else if (arg == "--rounds" && has_value)
            o.rounds = positive_number(arg, argv[++i]);
        else if (arg == "--preload" && has_value)
            o.preload = positive_number(arg, argv[++i]);
        else if (arg == "--quick")
            o.quick = true;
        else if (arg == "--throwaway-server")
            o.throwaway_server = true;
        else if (arg == "--fast-commits")
            o.fast_commits = true;
        else if (arg == "--through-pgbouncer")
            o.through_pgbouncer = true;
        else
            throw std::invalid_argument("unknown or incomplete argument '" + std::string(arg) + "'");
    }
    if (o.conninfo.empty() == !o.throwaway_server)
        throw std::invalid_argument("give exactly one of --conninfo and --throwaway-server");
    if (o.fast_commits && !o.throwaway_server) throw std::invalid_argument("--fast-commits goes with --throwaway-server");
    if (o.through_pgbouncer && !o.throwaway_server) throw std::invalid_argument("--through-pgbouncer goes with --throwaway-server");
    if (o.quick) {
        o.rounds = 1;
        if (o.deliveries == 0) o.deliveries = 60;
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// Connection strings and the scratch database
// ---------------------------------------------------------------------------------------------

/// The keywords and values of a libpq connection string (key=value or URI form).
std::vector<std::pair<std::string, std::string>> conninfo_fields(const std::string& conninfo) {
    char* message = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &message);
    if (parsed == nullptr) {
        PQfreemem(message);  // unread: it may quote part of a password
        throw std::invalid_argument("bad connection string " + pg::redact_conninfo(conninfo));
    }
    std::vector<std::pair<std::string, std::string>> fields;
    for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o)
        if (o->val != nullptr && *o->val != '\0') fields.emplace_back(o->keyword, o->val);
    PQconninfoFree(parsed);
    return fields;
}

std::string quoted_conninfo_value(const std::string& value) {
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

/// `conninfo` in key=value form (SOCI does not read the URI form), naming database `dbname`
/// instead of its own when given, and without the password if asked.
std::string key_value_conninfo(const std::string& conninfo, const std::optional<std::string>& dbname = std::nullopt,
                               bool with_password = true) {
    std::string out;
    for (const auto& [keyword, value] : conninfo_fields(conninfo)) {
        if ((keyword == "dbname" && dbname) || (keyword == "password" && !with_password)) continue;
        out += keyword + "=" + quoted_conninfo_value(value) + " ";
    }
    if (dbname) out += "dbname=" + quoted_conninfo_value(*dbname);
    return out;
}

std::optional<std::string> password_of(const std::string& conninfo) {
    for (const auto& [keyword, value] : conninfo_fields(conninfo))
        if (keyword == "password") return value;
    return std::nullopt;
}

/// A database of its own on the server of `admin_conninfo`, dropped by the destructor.
class scratch_database {
public:
    explicit scratch_database(const std::string& admin_conninfo)
        : admin_(key_value_conninfo(admin_conninfo)),
          name_("seqinbox_bench_" + std::to_string(::getpid()) + "_" +
                std::to_string(std::chrono::system_clock::now().time_since_epoch().count())) {
        soci::session admin(soci::postgresql, admin_);
        admin << "CREATE DATABASE " + name_;
    }

    scratch_database(const scratch_database&) = delete;
    scratch_database& operator=(const scratch_database&) = delete;

    ~scratch_database() {
        try {
            soci::session admin(soci::postgresql, admin_);
            admin << "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)";
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_postgres: could not drop database %s: %s\n", name_.c_str(), e.what());
        }
    }

    std::string conninfo(bool with_password = true) const { return key_value_conninfo(admin_, name_, with_password); }
    const std::string& admin_conninfo() const noexcept { return admin_; }

private:
    std::string admin_;
    std::string name_;
};

// ---------------------------------------------------------------------------------------------
// The pgbench baseline
// ---------------------------------------------------------------------------------------------

const std::string pgbench_sequence = "PgbenchSequence";
const std::string pgbench_type = "PgbenchType";
constexpr int pgbench_instances_count = 1000;

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string pgbench_program() {
    const char* dir = std::getenv("SEQINBOX_PG_BIN");
    const std::filesystem::path debian = "/usr/lib/postgresql/15/bin/pgbench";
    if (dir != nullptr) return (std::filesystem::path(dir) / "pgbench").string();
    return std::filesystem::exists(debian) ? debian.string() : "pgbench";
}

/// The instances the claims of the pgbench scripts reference (ids first..last).
struct pgbench_instances {
    long long first = 0;
    long long last = 0;
};

pgbench_instances create_pgbench_instances(soci::session& db) {
    db << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)"
          " SELECT :name, 'ctx' || g, 'OPEN', now(), now() + interval '1 day'"
          " FROM generate_series(1, " + std::to_string(pgbench_instances_count) + ") AS g",
        soci::use(pgbench_sequence);
    pgbench_instances ids;
    db << "SELECT min(id), max(id) FROM sequence_instance WHERE name = :name", soci::use(pgbench_sequence),
        soci::into(ids.first), soci::into(ids.last);
    return ids;
}

/// A pgbench script in a temporary file removed by the destructor. Its claims reference a random
/// instance per transaction; its ids are random per transaction.
class pgbench_script {
public:
    pgbench_script(const pgbench_instances& instances, const std::string& name, const std::string& sql)
        : path_(std::filesystem::temp_directory_path() / ("seqinbox-bench-" + std::to_string(::getpid()) + "-" + name + ".sql")),
          instances_(instances) {
        std::ofstream(path_) << "\\set instance random(:first_instance, :last_instance)\n"
                                "\\set n random(1, 9223372036854775806)\n"
                                "BEGIN;\n" << sql << "END;\n";
    }

    pgbench_script(const pgbench_script&) = delete;
    pgbench_script& operator=(const pgbench_script&) = delete;

    ~pgbench_script() {
        std::error_code ignored;
        std::filesystem::remove(path_, ignored);
    }

    /// The pgbench arguments that run this script.
    std::string arguments() const {
        return "-f " + shell_quote(path_.string()) + " -D first_instance=" + std::to_string(instances_.first) +
               " -D last_instance=" + std::to_string(instances_.last);
    }

private:
    std::filesystem::path path_;
    pgbench_instances instances_;
};

/// One delivery's minimal SQL: its claim and its PROCESSED row.
std::string single_delivery_sql() {
    const std::string id = "CAST(:client_id AS text) || '-' || CAST(:n AS text)";
    return "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
           " VALUES ('" + pgbench_type + "', " + id + ", :instance, now())"
           " ON CONFLICT (message_type, idempotence_id) DO NOTHING;\n"
           "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
           " state_changed_at) VALUES (:instance, '" + pgbench_type + "', " + id + ", 'PROCESSED', now(), now());\n";
}

/// A batch's minimal SQL by hand: batch_size claims in one unnest insert, as many rows in another.
std::string batch_sql() {
    const std::string ids = "unnest(ARRAY(SELECT CAST(:client_id AS text) || '-' || CAST(:n AS text) || '-' || CAST(g AS text)"
                            " FROM generate_series(1, " + std::to_string(batch_size) + ") AS g)) AS k";
    return "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
           " SELECT '" + pgbench_type + "', k, :instance, now() FROM " + ids +
           " ORDER BY k ON CONFLICT (message_type, idempotence_id) DO NOTHING;\n"
           "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
           " state_changed_at) SELECT :instance, '" + pgbench_type + "', k, 'PROCESSED', now(), now() FROM " + ids + ";\n";
}

std::string run_command(const std::string& command) {
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
    if (!pipe) throw std::runtime_error("cannot run " + command);
    std::string output;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) output.append(buffer, n);
    const int status = ::pclose(pipe.release());
    if (status != 0) throw check_failed("pgbench failed (status " + std::to_string(status) + "):\n" + output);
    return output;
}

// Plain string search: GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitized -O1 build.
double number_after(const std::string& output, const std::string& label) {
    const auto at = output.find(label);
    auto start = at == std::string::npos ? at : output.find_first_not_of(' ', at + label.size());
    const auto end = start == std::string::npos ? start : output.find_first_not_of("0123456789.", start);
    if (start == std::string::npos || end == start) throw check_failed("no '" + label + "' in the pgbench output:\n" + output);
    return std::stod(output.substr(start, end - start));
}

/// Deliveries per second of pgbench with `clients` clients (as many threads) on the script, each
/// of its transactions standing for `per_transaction` deliveries.
double measure_pgbench(const scratch_database& db, const pgbench_script& script, std::size_t clients,
                       std::size_t per_transaction, const options& o) {
    const std::string n = std::to_string(clients);
    const std::size_t transactions = (o.deliveries + clients * per_transaction - 1) / (clients * per_transaction);
    const std::string length = o.deliveries == 0 ? "-T " + std::to_string(o.seconds) : "-t " + std::to_string(transactions);
    if (const auto password = password_of(db.admin_conninfo())) ::setenv("PGPASSWORD", password->c_str(), 1);
    const std::string output = run_command(shell_quote(pgbench_program()) + " -n -M prepared " + script.arguments() +
                                           " -c " + n + " -j " + n + " " + length + " " +
                                           shell_quote(db.conninfo(false)) + " 2>&1");
    if (output.find("number of failed transactions") != std::string::npos)
        require(number_after(output, "number of failed transactions:") == 0, "pgbench transactions failed:\n" + output);
    return number_after(output, "tps =") * static_cast<double>(per_transaction);
}

// ---------------------------------------------------------------------------------------------
// Verification of the committed state
// ---------------------------------------------------------------------------------------------

std::string bench_types_sql() {
    std::string list;
    for (const auto& type : chain_types) list += (list.empty() ? "'" : ", '") + type + "'";
    return "(" + list + ")";
}

void require_count(soci::session& db, const std::string& what, const std::string& query, std::size_t expected) {
    const long long n = count(db, query);
    require(n == static_cast<long long>(expected),
            what + ": " + std::to_string(n) + " instead of " + std::to_string(expected));
}

/// Everything the inbox delivered is PROCESSED once, claimed once, and every instance CLOSED.
void verify_committed_state(soci::session& db, const tally& total) {
    const std::string types = bench_types_sql();
    require_count(db, "PROCESSED rows",
                  "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED' AND message_type IN " + types,
                  total.deliveries);
    require_count(db, "rows not PROCESSED",
                  "SELECT count(*) FROM sequenced_message WHERE state <> 'PROCESSED' AND message_type IN " + types, 0);
    require_count(db, "distinct stored messages",
                  "SELECT count(DISTINCT (message_type, idempotence_id)) FROM sequenced_message WHERE message_type IN " +
                      types,
                  total.deliveries);
    require_count(db, "claims", "SELECT count(*) FROM sequential_inbox_idempotence WHERE message_type IN " + types,
                  total.deliveries);
    require_count(db, "instances", "SELECT count(*) FROM sequence_instance WHERE name = '" + bench_sequence + "'",
                  total.contexts);
    require_count(db, "CLOSED instances",
                  "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED' AND name = '" + bench_sequence + "'",
                  total.contexts);
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

pg::store_options store_options_for(const scratch_database& db) {
    pg::store_options s;
    s.conninfo = db.conninfo();
    s.pool_size = 8;  // two per thread of the 4-thread run
    return s;
}

/// What compare measures: the inbox delivering by `how` against pgbench running `script`, whose
/// transactions each stand for `per_transaction` deliveries; figures named after `names`.
struct comparison {
    unit how;
    const pgbench_script& script;
    std::size_t per_transaction;
    std::string inbox_rate, pgbench_rate, ratio;
};

struct compared {
    double deliveries_per_s = 0;  ///< median
    double round_trips_per_delivery = 0;
};

/// `o.rounds` rounds of the inbox with `threads` threads, each followed by pgbench with as many
/// clients. Prints the medians of both rates and of their per-round ratio.
compared compare(pg::store& store, const scratch_database& db, const comparison& c, std::size_t threads, const options& o,
                 tally& total) {
    const std::string suffix = "_" + std::to_string(threads);
    std::vector<double> inbox_rates, pgbench_rates, ratios;
    tally delivered;
    std::uint64_t round_trips = 0;
    for (std::size_t round = 0; round < o.rounds; ++round) {
        const std::string name = c.inbox_rate + suffix + "r" + std::to_string(round);
        const run_result inbox = measure_inbox(store, threads, name, o, total, c.how);
        require_all_processed(inbox, name);
        delivered += inbox.done;
        round_trips += inbox.round_trips;
        inbox_rates.push_back(inbox.deliveries_per_s());
        pgbench_rates.push_back(measure_pgbench(db, c.script, threads, c.per_transaction, o));
        ratios.push_back(inbox_rates.back() / pgbench_rates.back());
    }
    print("deliveries" + std::string(c.how == unit::batch ? "_batch" : "") + suffix, static_cast<double>(delivered.deliveries));
    print(c.inbox_rate + suffix, median(inbox_rates));
    print(c.pgbench_rate + suffix, median(pgbench_rates));
    print(c.ratio + suffix, median(ratios));
    print(c.ratio + "_min" + suffix, std::ranges::min(ratios));
    print(c.ratio + "_max" + suffix, std::ranges::max(ratios));
    return {median(inbox_rates), static_cast<double>(round_trips) / static_cast<double>(delivered.deliveries + delivered.duplicates)};
}

/// `n` claims and PROCESSED messages of another sequence, three per CLOSED instance, as a
/// database in service for a while holds them.
void preload(soci::session& db, std::size_t n) {
    const std::string count = std::to_string(n);
    db << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, closed_at)"
          " SELECT 'PreloadSequence', 'p-' || g, 'CLOSED', now(), now() + interval '1 day', now()"
          " FROM generate_series(0, (" + count + " - 1) / 3) AS g";
    db << "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
          " SELECT 'PreloadType', 'p-' || g, i.id, now() FROM generate_series(0, " + count + " - 1) AS g"
          " JOIN sequence_instance i ON i.name = 'PreloadSequence' AND i.context_id = 'p-' || (g / 3)";
    db << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
          " SELECT sequence_instance_id, message_type, idempotence_id, 'PROCESSED', now(), now() FROM sequential_inbox_idempotence"
          " WHERE message_type = 'PreloadType'";
    db << "ANALYZE";
    print("preloaded", static_cast<double>(n));
}

/// The one-thread batch figure on a database preloaded with `o.preload` claims and messages,
/// against `empty` on the same server, round by round. Verifies what the preloaded runs stored.
void compare_preloaded(pg::store& empty, const std::string& admin_conninfo, const options& o, tally& total) {
    const scratch_database db(admin_conninfo);
    pg::migrate(db.conninfo());
    soci::session session(soci::postgresql, db.conninfo());
    preload(session, o.preload);
    tally preloaded_total;
    std::vector<double> rates, ratios;
    {
        pg::store preloaded(store_options_for(db));
        for (std::size_t round = 0; round < o.rounds; ++round) {
            const std::string name = "preload_r" + std::to_string(round);
            const run_result with = measure_inbox(preloaded, 1, name, o, preloaded_total, unit::batch);
            const run_result without = measure_inbox(empty, 1, name + "_empty", o, total, unit::batch);
            require_all_processed(with, name);
            require_all_processed(without, name + "_empty");
            rates.push_back(with.deliveries_per_s());
            ratios.push_back(with.deliveries_per_s() / without.deliveries_per_s());
        }
    }
    verify_committed_state(session, preloaded_total);
    print("deliveries_per_s_batch_1_preloaded", median(rates));
    print("preloaded_vs_empty_batch_1", median(ratios));
    print("preloaded_vs_empty_batch_min_1", std::ranges::min(ratios));
    print("preloaded_vs_empty_batch_max_1", std::ranges::max(ratios));
}

/// The batch figures through a throwaway PgBouncer in front of `server` against `direct`, both
/// stores on database `db`, alternating round by round so that both sides of a ratio ran under
/// the same load.
void compare_through_pgbouncer(const seqinbox::test::pg_server& server, const scratch_database& db, pg::store& direct,
                               const options& o, tally& total) {
    constexpr int server_connections = 6;  // fewer than the store's 8, more than 4 claim transactions
    const seqinbox::test::pgbouncer_server bouncer(server, {.pool_size = server_connections});
    pg::store_options pooled_options = store_options_for(db);
    pooled_options.conninfo = bouncer.through(db.conninfo());
    pooled_options.through = pg::pooler::transaction;
    pg::store pooled(pooled_options);
    print("pgbouncer_server_connections", server_connections);
    print("pgbouncer_clients", static_cast<double>(pooled_options.pool_size));
    for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
        const std::string suffix = "_" + std::to_string(threads);
        std::vector<double> direct_rates, pooled_rates, ratios;
        for (std::size_t round = 0; round < o.rounds; ++round) {
            const std::string name = "pgbouncer" + suffix + "r" + std::to_string(round);
            // Which side goes first alternates: neither gains from what the other left behind.
            const bool direct_first = round % 2 == 0;
            const run_result first = measure_inbox(direct_first ? direct : pooled, threads, name + (direct_first ? "_direct" : ""), o, total, unit::batch);
            const run_result second = measure_inbox(direct_first ? pooled : direct, threads, name + (direct_first ? "" : "_direct"), o, total, unit::batch);
            const run_result& without = direct_first ? first : second;
            const run_result& with = direct_first ? second : first;
            require_all_processed(without, name + "_direct");
            require_all_processed(with, name);
            direct_rates.push_back(without.deliveries_per_s());
            pooled_rates.push_back(with.deliveries_per_s());
            ratios.push_back(pooled_rates.back() / direct_rates.back());
        }
        print("batch_deliveries_per_s_direct" + suffix, median(direct_rates));
        print("batch_deliveries_per_s_pgbouncer" + suffix, median(pooled_rates));
        print("pgbouncer_vs_direct" + suffix, median(ratios));
        print("pgbouncer_vs_direct_min" + suffix, std::ranges::min(ratios));
        print("pgbouncer_vs_direct_max" + suffix, std::ranges::max(ratios));
    }
}

void run(const options& o) {
    std::optional<seqinbox::test::pg_server> server;
    using seqinbox::test::pg_server;
    if (o.throwaway_server) server.emplace(o.fast_commits ? pg_server::commits::not_durable : pg_server::commits::durable);
    const scratch_database db(server ? server->conninfo() : o.conninfo);
    pg::migrate(db.conninfo());
    soci::session session(soci::postgresql, db.conninfo());
    print_server_settings(session);
    const auto instances = create_pgbench_instances(session);
    const pgbench_script single(instances, "single", single_delivery_sql());
    const pgbench_script batched(instances, "batch", batch_sql());
    const comparison one_by_one{unit::context, single, 1, "deliveries_per_s", "pgbench_tps", "inbox_vs_pgbench"};
    const comparison batches{unit::batch, batched, batch_size, "deliveries_per_s_batch", "pgbench_batch_rows_per_s", "batch_vs_pgbench"};
    tally total;
    {
        pg::store store(store_options_for(db));
        print("rounds", static_cast<double>(o.rounds));
        if (o.through_pgbouncer) {
            compare_through_pgbouncer(*server, db, store, o, total);
            verify_committed_state(session, total);
            print("verified_deliveries", static_cast<double>(total.deliveries));
            return;
        }
        const compared single_1 = compare(store, db, one_by_one, 1, o, total);
        print("round_trips_per_delivery", single_1.round_trips_per_delivery);
        print_breakdown(store, o.quick ? 5 : 300, total);
        print("round_trips_per_delivery_4", compare(store, db, one_by_one, 4, o, total).round_trips_per_delivery);
        print("pgbench_round_trips_per_transaction", 4);  // BEGIN, two INSERTs, END
        const compared batch_1 = compare(store, db, batches, 1, o, total);
        print("round_trips_per_delivery_batch", batch_1.round_trips_per_delivery);
        print("batch_vs_single_1", batch_1.deliveries_per_s / single_1.deliveries_per_s);
        compare(store, db, batches, 4, o, total);
        if (o.preload > 0) compare_preloaded(store, db.admin_conninfo(), o, total);
    }
    verify_committed_state(session, total);
    print("verified_deliveries", static_cast<double>(total.deliveries));
}

}  // namespace

int main(int argc, char** argv) {
    try {
        run(parse_options(argc, argv));
        return 0;
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "bench_postgres: %s\n%s", e.what(), usage);
        return 2;
    } catch (const check_failed& e) {
        std::fprintf(stderr, "bench_postgres: check failed: %s\n", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_postgres: %s\n", e.what());
    }
    return 1;
}
