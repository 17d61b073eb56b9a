#pragma once
// Command-line options shared by the subcommands that talk to Kafka and run housekeeping
// (`run`, `housekeep`): each reader takes the current argument when it is one of its options.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "options.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/kafka/properties.hpp"
#include "seqinbox/relay/http_access.hpp"

namespace seqinbox::cli {

/// The option of the housekeeping batch: `run` has a `--batch-size` of its own (records).
constexpr std::string_view housekeep_batch_flag = "--batch-size";
constexpr std::string_view run_housekeeping_batch_flag = "--housekeeping-batch-size";

/// The housekeeping options' help, the batch named `batch_flag`.
inline std::string housekeeping_flags_help(std::string_view batch_flag) {
    constexpr std::size_t column = 26;  // where the other options' descriptions start
    std::string batch = std::string(batch_flag) + " N";
    batch.resize(std::max(batch.size() + 2, column), ' ');
    return "  --removal-delay D         time after retain_until before an expired instance is removed (default 24h;\n"
           "                            0s: in the run that marks it)\n"
           "  " + batch + "instances per housekeeping transaction (default 100)\n"
           "  --max-duration D          bound of one housekeeping run, shared by its three jobs: each gets an\n"
           "                            equal share of the time left when it starts; the next run resumes (default 15m)\n"
           "  --work-share PERCENT      pace: the share of its time a job spends on batches, pausing the rest so\n"
           "                            that processing keeps the database (1 to 100, default 20)\n";
}

constexpr std::string_view producer_flags_help =
    "  --bootstrap-servers HOSTS Kafka brokers of the default cluster (host:port,...)\n"
    "  --producer-property K=V   librdkafka producer property (repeatable)\n";

/// `batch_flag`: housekeep_batch_flag or run_housekeeping_batch_flag.
inline bool read_housekeeping_flag(option_reader& r, housekeeping_options& o, std::string_view batch_flag) {
    using std::chrono::duration_cast;
    using std::chrono::seconds;
    if (auto v = r.value("--removal-delay"))
        o.removal_delay = duration_cast<seconds>(r.duration("--removal-delay", *v, option_reader::zero::allowed));
    else if (auto v = r.value("--max-duration")) o.max_duration = duration_cast<seconds>(r.duration("--max-duration", *v));
    else if (auto v = r.value(batch_flag)) o.batch_size = r.number(batch_flag, *v, 1, 100000);
    else if (auto v = r.value("--work-share")) o.work_share = static_cast<double>(r.number("--work-share", *v, 1, 100)) / 100;
    else return false;
    return true;
}

inline bool read_producer_flag(option_reader& r, std::string& bootstrap_servers, kafka::properties& producer) {
    if (auto v = r.value("--bootstrap-servers")) {
        bootstrap_servers = std::string(*v);
        return true;
    }
    if (auto v = r.value("--producer-property")) {
        assign(producer, r.assignment("--producer-property", *v));
        return true;
    }
    return false;
}

/// Where the HTTP endpoint (operator API, console, /metrics, /healthz) listens, and its tokens.
struct http_flags {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::optional<std::filesystem::path> view_token_file{};
    std::optional<std::filesystem::path> write_token_file{};

    relay::access_tokens tokens() const { return relay::read_access_tokens(view_token_file, write_token_file); }
};

/// The HTTP options' help, `what` naming what the port serves.
inline std::string http_flags_help(std::uint16_t default_port, std::string_view what) {
    return "  --http-address IP         IPv4 address of " + std::string(what) + " (default 127.0.0.1; another needs a view token)\n"
           "  --http-port PORT          its port (default " + std::to_string(default_port) + "; 0: a free one, logged)\n"
           "  --view-token-file FILE    bearer token that lets the operator API and console read (default: the\n"
           "                            environment variable SEQINBOX_VIEW_TOKEN; none: views open on loopback)\n"
           "  --write-token-file FILE   bearer token that also lets them request actions (default: the environment\n"
           "                            variable SEQINBOX_WRITE_TOKEN; none: no writes)\n";
}

inline bool read_http_flag(option_reader& r, http_flags& f) {
    if (auto v = r.value("--http-address")) f.host = std::string(*v);
    else if (auto v = r.value("--http-port")) f.port = static_cast<std::uint16_t>(r.number("--http-port", *v, 0, 65535));
    else if (auto v = r.value("--view-token-file")) f.view_token_file = std::string(*v);
    else if (auto v = r.value("--write-token-file")) f.write_token_file = std::string(*v);
    else return false;
    return true;
}

}  // namespace seqinbox::cli
