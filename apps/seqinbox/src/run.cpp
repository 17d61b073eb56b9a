// seqinbox run: see run.hpp.
#include "run.hpp"

#include <iostream>
#include <optional>
#include <string>

#include "database_flag.hpp"
#include "options.hpp"
#include "pooler_flag.hpp"
#include "service_flags.hpp"
#include "stop_signals.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/relay/relay.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view usage_text =
    "usage: seqinbox run --declarations FILE --postgres CONNINFO --bootstrap-servers HOSTS --dead-letter-topic TOPIC\n"
    "                    [options]\n"
    "\n"
    "The relay: consumes the topics the declarations name, and publishes every released message,\n"
    "in the declared order per context and once per logical message, to its sequence's output\n"
    "topic with the original key, value and headers. Failed deliveries go to the dead-letter topic.\n"
    "Serves /metrics, /healthz, the operator API (/api/v1) and the web console (/) on one port,\n"
    "runs the pending-action and housekeeping jobs, logs one line per decision, and stops gracefully\n"
    "on SIGTERM or SIGINT.\n"
    "\n"
    "options:\n"
    "  --declarations FILE       YAML sequence declarations (built-in extractors only)\n"
    SEQINBOX_DATABASE_FLAG_HELP
    SEQINBOX_POOLER_FLAG_HELP
    "  --dead-letter-topic TOPIC topic of failed deliveries, on the default cluster\n"
    "  --input-topic TOPIC       topic of the message types whose declaration names none\n"
    "  --output-topic SEQ=TOPIC  output topic of sequence SEQ (repeatable)\n"
    "  --output-prefix PREFIX    output topic of the other sequences: PREFIX followed by the sequence name\n"
    "  --cluster NAME=HOSTS      another cluster, as named by clusterName in the declarations (repeatable)\n"
    "  --group-id ID             consumer group on every cluster (default seqinbox-relay)\n"
    "  --consumer-property K=V   librdkafka consumer property on every cluster (repeatable)\n"
    "  --type-header NAME        header naming the message type (default message-type)\n"
    "  --idempotence-header NAME header carrying the idempotence id (default idempotence-id)\n"
    "  --threads N               consumer threads (default 1)\n"
    "  --batch-size N            records a consumer thread decides in one transaction (default 250;\n"
    "                            on PostgreSQL clamped to what its lock table lets one transaction hold)\n"
    "  --batch-linger D          how long a batch waits for more records after its first (default 5ms)\n"
    "  --actions-every D         interval of the pending-action and gap-timeout jobs (default 10s)\n"
    "  --action-page-size N      instances per page of those jobs (default 100)\n"
    "  --action-pages N          pages per run of those jobs (default 10)\n"
    "  --housekeeping-every D    housekeeping interval (default 10m)\n"
    "  --delivery-timeout D      how long a publish waits for the broker (default 30s)\n"
    "  --log-level LEVEL         trace, debug, info (default: a line per decision), warn or error\n";

constexpr std::string_view exit_text =
    "\n"
    "exit status: 0 stopped on SIGTERM or SIGINT, 1 could not start (reason on stderr), 2 usage error\n";

struct run_call {
    relay::relay_options options;
    std::string bootstrap_servers;
    std::optional<std::string> group_id;  ///< unset: the relay's default
    kafka::properties consumer;
    std::map<std::string, std::string> other_clusters;  ///< name -> bootstrap servers
    http_flags http;
};

log_level level_named(std::string_view text) {
    for (auto level : {log_level::trace, log_level::debug, log_level::info, log_level::warn, log_level::error})
        if (to_string(level) == text) return level;
    throw usage_error("seqinbox run: option '--log-level' expects trace, debug, info, warn or error, not '" +
                      std::string(text) + "'");
}

bool read_relay_flag(option_reader& r, run_call& call) {
    auto& o = call.options;
    if (auto v = r.value("--declarations")) o.declarations = std::string(*v);
    else if (read_database_flag(r, o.conninfo)) return true;
    else if (read_pooler_flag(r, o.pooler)) return true;
    else if (auto v = r.value("--dead-letter-topic")) o.dead_letter_topic = std::string(*v);
    else if (auto v = r.value("--input-topic")) o.input_topic = std::string(*v);
    else if (auto v = r.value("--output-topic")) assign(o.output_topics, r.assignment("--output-topic", *v));
    else if (auto v = r.value("--output-prefix")) o.output_prefix = std::string(*v);
    else if (auto v = r.value("--cluster")) assign(call.other_clusters, r.assignment("--cluster", *v));
    else if (auto v = r.value("--group-id")) call.group_id = std::string(*v);
    else if (auto v = r.value("--consumer-property")) assign(call.consumer, r.assignment("--consumer-property", *v));
    else if (auto v = r.value("--type-header")) o.type_header = std::string(*v);
    else if (auto v = r.value("--idempotence-header")) o.idempotence_header = std::string(*v);
    else if (auto v = r.value("--threads")) o.consumer_threads = r.number("--threads", *v, 1, 64);
    else if (auto v = r.value("--batch-size")) o.batch_size = r.number("--batch-size", *v, 1, 100000);
    else if (auto v = r.value("--batch-linger")) o.batch_linger = r.duration("--batch-linger", *v);
    else if (auto v = r.value("--actions-every")) o.actions_every = r.duration("--actions-every", *v);
    else if (auto v = r.value("--action-page-size")) o.action_page_size = r.number("--action-page-size", *v, 1, 100000);
    else if (auto v = r.value("--action-pages")) o.action_pages = r.number("--action-pages", *v, 1, 100000);
    else if (auto v = r.value("--housekeeping-every")) o.housekeeping_every = r.duration("--housekeeping-every", *v);
    else if (auto v = r.value("--delivery-timeout")) o.delivery_timeout = r.duration("--delivery-timeout", *v);
    else if (auto v = r.value("--log-level")) o.log_threshold = level_named(*v);
    else return false;
    return true;
}

/// The consumer configuration of every cluster: the default one and the named ones.
std::vector<kafka::cluster_config> clusters_of(const run_call& call) {
    auto consumer_for = [&](const std::string& servers) {
        auto props = call.consumer;
        props.insert_or_assign("bootstrap.servers", servers);
        if (call.group_id) props.insert_or_assign("group.id", *call.group_id);
        return props;
    };
    std::vector<kafka::cluster_config> clusters{{"", consumer_for(call.bootstrap_servers)}};
    for (const auto& [name, servers] : call.other_clusters) clusters.push_back({name, consumer_for(servers)});
    return clusters;
}

std::optional<relay::relay_options> parse(std::span<const std::string_view> args) {
    run_call call;
    call.http.port = call.options.http_port;
    for (option_reader r(args, "run"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage_text << http_flags_help(relay::relay_options{}.http_port, "/metrics, /healthz, the API and console") << producer_flags_help
                      << housekeeping_flags_help(run_housekeeping_batch_flag) << exit_text;
            return std::nullopt;
        }
        if (!read_relay_flag(r, call) && !read_http_flag(r, call.http) && !read_producer_flag(r, call.bootstrap_servers, call.options.producer) &&
            !read_housekeeping_flag(r, call.options.housekeeping, run_housekeeping_batch_flag))
            r.unknown();
    }
    require_option("run", !call.options.declarations.empty(), "--declarations");
    require_option("run", !call.options.conninfo.empty(), "--postgres");
    require_option("run", !call.bootstrap_servers.empty(), "--bootstrap-servers");
    require_option("run", !call.options.dead_letter_topic.empty(), "--dead-letter-topic");
    call.options.clusters = clusters_of(call);
    call.options.http_host = call.http.host;
    call.options.http_port = call.http.port;
    call.options.tokens = call.http.tokens();
    return std::move(call.options);
}

}  // namespace

int run_command(std::span<const std::string_view> args) {
    const auto options = parse(args);
    if (!options) return exit_ok;
    const sigset_t signals = block_stop_signals();
    relay::relay service(*options, std::cerr);
    service.start();
    const std::string_view received = wait_for_stop_signal(signals);
    logger::stream_logger(std::cerr).log(log_level::info, "stopping on " + std::string(received));
    service.stop();
    return exit_ok;
}

}  // namespace seqinbox::cli
