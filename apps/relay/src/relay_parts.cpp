// Private to the relay: relay_parts.hpp.
#include "relay_parts.hpp"

#include <algorithm>

#include "seqinbox/error.hpp"
#include "seqinbox/yaml/loader.hpp"

namespace seqinbox::relay::detail {

thread_local std::string thread_part;
thread_local kafka::publication_batch* batch_publications = nullptr;

namespace {

/// A longer linger would only delay decisions: a batch waits for more at most this long.
constexpr std::chrono::milliseconds max_batch_linger{std::chrono::seconds(10)};

const kafka::cluster_config& default_cluster(const relay_options& o) {
    for (const auto& c : o.clusters)
        if (c.name.empty()) return c;
    misconfigured("no default Kafka cluster (the one without a name) is configured: it holds the output and dead-letter topics");
}

}  // namespace

void misconfigured(const std::string& problem) { throw error(error_category::configuration, "relay: " + problem); }

/// A relay that crashed stays in its group until its session times out, and a relay started
/// in its place decides nothing until then: librdkafka's 45 s cost 89 s on the mock cluster from
/// the restart to the assignment, 10 s cost 19 s. Heartbeats come from librdkafka's own thread,
/// so a long batch does not end a session; a longer one is a --consumer-property away.
constexpr const char* default_session_timeout_ms = "10000";

std::vector<kafka::cluster_config> consumer_clusters(const relay_options& o) {
    auto clusters = o.clusters;
    for (auto& c : clusters) {
        c.consumer.try_emplace("group.id", "seqinbox-relay");
        c.consumer.try_emplace("session.timeout.ms", default_session_timeout_ms);
    }
    return clusters;
}

kafka::properties producer_properties(const relay_options& o) {
    const auto& consumer = default_cluster(o).consumer;
    const auto servers = consumer.find("bootstrap.servers");
    if (servers == consumer.end()) misconfigured("the default Kafka cluster has no bootstrap.servers");
    auto props = o.producer;
    props.try_emplace("bootstrap.servers", servers->second);
    return props;
}

declarations<std::string> load(const relay_options& o) {
    if (o.dead_letter_topic.empty()) misconfigured("the dead-letter topic is empty");
    if (o.consumer_threads == 0) misconfigured("consumer_threads is 0");
    if (o.batch_size == 0) misconfigured("batch_size is 0");
    if (o.batch_linger < std::chrono::milliseconds(0) || o.batch_linger > max_batch_linger)
        misconfigured("batch_linger = " + std::to_string(o.batch_linger.count()) + " ms is out of range (0 to " +
                      std::to_string(max_batch_linger.count()) + " ms)");
    auto decls = yaml::load_file<std::string>(o.declarations, yaml::registry<std::string>{},
                                              {.missing_context_id = yaml::relay_missing_context_id});
    for (const auto& [sequence, topic] : o.output_topics)
        if (std::ranges::none_of(decls.sequences, [&](const auto& s) { return s.name == sequence; }))
            misconfigured("an output topic is given for sequence '" + sequence + "', which " + o.declarations.string() +
                          " does not declare");
    return decls;
}

housekeeping_options declared_windows(housekeeping_options o, const declarations<std::string>& decls) {
    o.deduplication_windows = deduplication_windows_of(decls);
    return o;
}

std::string describe(const housekeeping_report& r) {
    return "housekeeping: " + std::to_string(r.closed_removed) + " closed removed, " + std::to_string(r.marked) + " marked, " +
           std::to_string(r.expired_removed) + " expired removed, " + std::to_string(r.forwarded) + " waiting forwarded" +
           (r.stopped    ? " (stopped early by the relay's stop; the next run resumes)"
            : r.complete ? ""
                         : " (stopped at max duration, resumes next run)");
}

}  // namespace seqinbox::relay::detail
