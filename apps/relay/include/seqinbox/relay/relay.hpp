#pragma once
// The relay service behind `seqinbox run`, for teams that write no C++: it consumes the topics a
// YAML declaration names, decides every record with the inbox on PostgreSQL or MariaDB (the store
// the connection string names: a mariadb:// URL or a libpq conninfo), and publishes each
// released message, in the declared order per context and once per logical message, to the
// output topic of its sequence, keeping the original key, value and headers (the type and
// idempotence-id headers included). Failed deliveries go to the dead-letter topic. It serves
// /metrics, /healthz, the operator API and the web console (seqinbox/relay/operator_api.hpp) on
// one HTTP port, on the loopback interface unless told otherwise, and runs the pending-action
// and housekeeping jobs on schedule, each on a thread of its own (an action does not wait for a
// housekeeping run). Connections: a pool of `consumer_threads` x 2 + 6 for the consumer threads
// and the jobs, and one of 5 for the operator API and /metrics.
//
// Guarantees are the inbox's (docs/guarantees.md) with the publisher as the listener: a record reaches the
// output topic before its message is recorded PROCESSED, so a crash between the two publishes it
// again after restart (at-least-once for that window: the batch); a graceful stop() finishes the
// batches in progress and commits, so nothing is repeated.
//
// Batches: a consumer thread decides a polled batch in one transaction (basic_inbox::poll_batch).
// Its listeners produce without waiting; before the batch commits, the relay waits for all their
// acknowledgements at once. When one is refused, the batch rolls back and comes again, and the
// relay decides it one record at a time, each publish awaited, so that only the message whose
// publish fails becomes FAILED (dead-lettered); the others of the batch may be published twice. Records of one context go to one partition of
// the output topic (the partition key is the context id; the record key for messages that are
// not sequenced).
//
// Thread safety: start() and stop() are called from one thread; healthy() from any.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "seqinbox/housekeeper.hpp"
#include "seqinbox/kafka/properties.hpp"
#include "seqinbox/kafka/source.hpp"
#include "seqinbox/logger/concept.hpp"
#include "seqinbox/postgresql/pooler.hpp"
#include "seqinbox/relay/http_access.hpp"

namespace seqinbox::relay {

struct relay_options {
    /// The YAML sequence declarations (docs/declarations.md); only built-in extractors and resolvers. A type
    /// without `missingContextId` dead-letters records without a context id (the library handles them).
    std::filesystem::path declarations{};
    /// The database, migrated with `seqinbox migrate`: a libpq connection string, or
    /// mariadb://user:password@host:port/database for the MariaDB store (seqinbox/mariadb/store.hpp).
    std::string conninfo{};
    /// postgresql::pooler::transaction when conninfo reaches PostgreSQL through PgBouncer in
    /// transaction mode (`--pooler transaction`). PostgreSQL's only: refused with a MariaDB URL.
    postgresql::pooler pooler = postgresql::pooler::none;
    /// Consumer properties per cluster; the cluster named "" is the default one and is required:
    /// the output and dead-letter topics live there. group.id defaults to "seqinbox-relay".
    std::vector<kafka::cluster_config> clusters{};
    /// Extra producer properties (output and dead-letter producers); bootstrap.servers comes from
    /// the default cluster.
    kafka::properties producer{};
    /// The topic of message types whose declaration names none.
    std::string input_topic{};
    /// Output topic per sequence name; a sequence not listed publishes to `output_prefix` + name.
    std::map<std::string, std::string> output_topics{};
    std::string output_prefix{};
    std::string dead_letter_topic{};
    /// Headers carrying the message type and the idempotence id.
    std::string type_header = "message-type";
    std::string idempotence_header = "idempotence-id";
    /// Threads deciding records. The relay is one member of its consumer group: one thread polls
    /// and queues each record for the consumer thread its context id hashes to, so that one
    /// thread decides all of a context's records, whatever partitions they arrive on, and batches
    /// of different threads never wait for each other's instance locks.
    std::size_t consumer_threads = 1;
    /// Each consumer thread decides up to batch_size records in one transaction, taking what the
    /// consumer fetched plus what arrives within batch_linger; the batch's publications are
    /// acknowledged together before it commits. 250: per record, two fifths of the per-batch
    /// costs of 100 (the claim statement, the commit's WAL flush, the wait for the broker), for a
    /// window of repeats after a crash of at most that many records per thread; Kafka's own
    /// max.poll.records is 500. A batch_size larger than one transaction may decide within the
    /// server's lock table (postgresql::store::max_batch_records) is clamped to it, with a line in
    /// the log at start. The MariaDB store has no such limit: nothing is clamped there.
    std::size_t batch_size = 250;
    std::chrono::milliseconds batch_linger{5};
    /// Port of /metrics, /healthz, the operator API and console; 0 picks a free one (see http_port()).
    std::uint16_t http_port = 9464;
    /// The IPv4 address it listens on; one that is not loopback needs a view token.
    std::string http_host = "127.0.0.1";
    /// The operator API's tokens (read_access_tokens); none: views on loopback only, no writes.
    access_tokens tokens{};
    /// The pending-action job's and the gap-timeout job's interval, page size and pages per run.
    std::chrono::milliseconds actions_every{std::chrono::seconds(10)};
    std::size_t action_page_size = 100;
    std::size_t action_pages = 10;
    std::chrono::milliseconds housekeeping_every{std::chrono::minutes(10)};
    /// Housekeeping; its deduplication windows come from the declarations.
    housekeeping_options housekeeping{};
    /// Share of the retention after which /metrics counts an OPEN instance as expiring.
    double expiring_share = 0.75;
    /// How long a publish waits for the broker before the delivery fails.
    std::chrono::milliseconds delivery_timeout{std::chrono::seconds(30)};
    /// Lines below this level are not logged (info: one line per decision).
    log_level log_threshold = log_level::info;
};

/// The output topic of `sequence` under `options`.
std::string output_topic_of(const relay_options& options, const std::string& sequence);

namespace detail {
class relay_service;
}

class relay {
public:
    /// Loads and validates the declarations, connects to the database (checking the schema),
    /// creates the Kafka clients and listens on the HTTP port. Throws seqinbox::error naming
    /// what is wrong (every declaration problem at once, the unreachable database, the port).
    /// Decisions, job runs and errors are logged to `log`, one line each.
    relay(relay_options options, std::ostream& log);
    /// Stops like stop() when still running.
    ~relay();
    relay(const relay&) = delete;
    relay& operator=(const relay&) = delete;

    /// Starts the consumer threads and the job schedule.
    void start();
    /// Graceful stop: the consumer threads finish the deliveries in progress, the source commits
    /// and leaves the group, the jobs end (a housekeeping run after its batch in progress, its
    /// pause cut short; the next run resumes). Idempotent.
    void stop();

    std::uint16_t http_port() const noexcept;
    /// True while every consumer thread's last poll worked, the last job run reached the
    /// database and no record is being retried; otherwise why not (a line per retried record:
    /// topic[partition]@offset, failed attempts, last error).
    std::pair<bool, std::string> health() const;

private:
    std::unique_ptr<detail::relay_service> impl_;  // on the store conninfo names

};

}  // namespace seqinbox::relay
