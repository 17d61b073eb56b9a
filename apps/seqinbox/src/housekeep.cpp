// seqinbox housekeep: see housekeep.hpp.
#include "housekeep.hpp"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

#include "database_flag.hpp"
#include "json.hpp"
#include "open_store.hpp"
#include "options.hpp"
#include "pooler_flag.hpp"
#include "service_flags.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/kafka/dead_letter_sink.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/yaml/loader.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view usage_text =
    "usage: seqinbox housekeep --once --postgres CONNINFO --bootstrap-servers HOSTS --dead-letter-topic TOPIC [options]\n"
    "\n"
    "Runs the housekeeping jobs once: removes CLOSED instances past their deduplication window,\n"
    "marks OPEN instances past their retention for removal, and removes marked instances past\n"
    "their removal time after sending each of their WAITING messages to the dead-letter topic.\n"
    "Only one service instance runs a job at a time; a job another one is running is reported\n"
    "as skipped. `seqinbox run` schedules the same jobs.\n"
    "\n"
    "options:\n"
    "  --once                    required: run once and exit\n"
    SEQINBOX_DATABASE_FLAG_HELP
    SEQINBOX_POOLER_FLAG_HELP
    "  --dead-letter-topic TOPIC topic receiving the WAITING messages of removed instances\n"
    "  --declarations FILE       YAML declarations whose deduplicationWindow values apply (other\n"
    "                            names need not be built in); without it, or for a sequence it\n"
    "                            does not declare, a CLOSED instance is kept for its retention\n"
    "  --json                    one JSON document instead of text\n";

struct housekeep_call {
    bool once = false;
    bool json = false;
    std::string conninfo, bootstrap_servers, dead_letter_topic, declarations;
    postgresql::pooler pooler = postgresql::pooler::none;
    kafka::properties producer;
    housekeeping_options housekeeping;
};

std::optional<housekeep_call> parse(std::span<const std::string_view> args) {
    housekeep_call call;
    for (option_reader r(args, "housekeep"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage_text << producer_flags_help << housekeeping_flags_help(housekeep_batch_flag)
                      << "\nexit status: 0 done, 1 error (reason on stderr), 2 usage error\n";
            return std::nullopt;
        }
        if (r.flag("--once")) call.once = true;
        else if (r.flag("--json")) call.json = true;
        else if (read_database_flag(r, call.conninfo)) continue;
        else if (read_pooler_flag(r, call.pooler)) continue;
        else if (auto v = r.value("--dead-letter-topic")) call.dead_letter_topic = std::string(*v);
        else if (auto v = r.value("--declarations")) call.declarations = std::string(*v);
        else if (!read_producer_flag(r, call.bootstrap_servers, call.producer) && !read_housekeeping_flag(r, call.housekeeping, housekeep_batch_flag))
            r.unknown();
    }
    require_option("housekeep", call.once, "--once");
    require_option("housekeep", !call.conninfo.empty(), "--postgres");
    require_option("housekeep", !call.bootstrap_servers.empty(), "--bootstrap-servers");
    require_option("housekeep", !call.dead_letter_topic.empty(), "--dead-letter-topic");
    return call;
}

double seconds_of(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

void print_json(const housekeeping_report& report) {
    std::cout << "{\"closed_removed\":" << report.closed_removed << ",\"marked\":" << report.marked
              << ",\"expired_removed\":" << report.expired_removed << ",\"forwarded\":" << report.forwarded
              << ",\"complete\":" << (report.complete ? "true" : "false") << ",\"jobs\":[";
    for (std::size_t i = 0; i < report.jobs.size(); ++i) {
        const auto& job = report.jobs[i];
        std::cout << (i ? "," : "") << "{\"job\":" << json_string(job.job) << ",\"rows\":" << job.rows << ",\"batches\":" << job.batches
                  << ",\"seconds\":" << seconds_of(job.took) << ",\"paused_seconds\":" << seconds_of(job.paused)
                  << ",\"complete\":" << (job.complete ? "true" : "false") << "}";
    }
    std::cout << "],\"skipped\":[";
    for (std::size_t i = 0; i < report.skipped.size(); ++i) std::cout << (i ? "," : "") << json_string(report.skipped[i]);
    std::cout << "]}\n";
}

void print_text(const housekeeping_report& report) {
    std::cout << "closed instances removed   " << report.closed_removed << "\n"
              << "instances marked expired   " << report.marked << "\n"
              << "expired instances removed  " << report.expired_removed << "\n"
              << "waiting messages forwarded " << report.forwarded << "\n";
    for (const auto& job : report.jobs) {
        std::ostringstream line;
        line << std::fixed << std::setprecision(3) << "job " << std::left << std::setw(15) << job.job << std::right << std::setw(9)
             << job.rows << " rows in " << job.batches << " batches, " << seconds_of(job.took) << " s (" << seconds_of(job.paused)
             << " s paused)" << (job.complete ? "" : ", work left");
        std::cout << line.str() << "\n";
    }
    for (const auto& job : report.skipped) std::cout << "skipped (running elsewhere) " << job << "\n";
    if (!report.complete) std::cout << "stopped at --max-duration with work left; the next run resumes\n";
}

}  // namespace

int housekeep_command(std::span<const std::string_view> args) {
    const auto call = parse(args);
    if (!call) return exit_ok;
    housekeeping_options housekeeping = call->housekeeping;
    if (!call->declarations.empty())
        housekeeping.deduplication_windows = deduplication_windows_of(
            yaml::load_file(call->declarations, yaml::registry<std::string>{}, {.assume_registered = true}));
    kafka::properties producer = call->producer;
    producer.insert_or_assign("bootstrap.servers", call->bootstrap_servers);
    kafka::dead_letter_sink sink({.producer = producer, .topic = call->dead_letter_topic});
    return on_store(call->conninfo, call->pooler, 2, [&](auto& store) {
        basic_housekeeper<std::remove_reference_t<decltype(store)>, kafka::dead_letter_sink, clock::system_clock, logger::stream_logger>
            housekeeper(store, sink, housekeeping, {}, logger::stream_logger(std::cerr));
        const auto report = housekeeper.run_once();
        if (call->json) print_json(report);
        else print_text(report);
        return exit_ok;
    });
}

}  // namespace seqinbox::cli
