#pragma once
// Private to the relay: what its service (store_relay.hpp) shares whatever the store: the checks
// of its options, its Kafka settings, its log's per-thread prefix and its connection counts.
#include <chrono>
#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/kafka/properties.hpp"
#include "seqinbox/kafka/publisher.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/relay/relay.hpp"

namespace seqinbox::relay::detail {

/// The relay on one store: relay::relay forwards to it (store_relay.hpp).
class relay_service {
public:
    virtual ~relay_service() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    virtual std::uint16_t http_port() const noexcept = 0;
    virtual std::pair<bool, std::string> health() = 0;
};

/// The relay on PostgreSQL (relay_postgresql.cpp) and on MariaDB (relay_mariadb.cpp, in a build
/// with the MariaDB store).
std::unique_ptr<relay_service> postgresql_relay(relay_options options, std::ostream& log);
std::unique_ptr<relay_service> mariadb_relay(relay_options options, std::ostream& log);

/// The part of the relay the calling thread runs ("consumer 2"), empty on other threads.
extern thread_local std::string thread_part;

/// The publications of the batch the calling consumer thread is deciding: its listeners produce
/// into it without waiting. Null elsewhere (one record at a time, jobs): a listener waits for its
/// publish. Per thread, because the inbox runs a batch's listeners on the thread that polled it.
extern thread_local kafka::publication_batch* batch_publications;

/// The relay's log as its inboxes write to it: a consumer thread's lines (its decisions among
/// them) start with its name, as its Kafka and error lines do, so that the log tells which
/// thread decided, and published, what.
class part_logger {
public:
    explicit part_logger(logger::stream_logger& out) : out_(&out) {}
    bool enabled(log_level level) const { return out_->enabled(level); }
    void log(log_level level, std::string_view message) {
        if (thread_part.empty()) out_->log(level, message);
        else out_->log(level, thread_part + ": " + std::string(message));
    }

private:
    logger::stream_logger* out_;
};

/// After a failed poll a consumer thread waits this long, so that a database that is down is not
/// hammered and the log is not flooded.
constexpr std::chrono::milliseconds retry_pause{1000};

/// The database connections of the relay's store: two per consumer thread (a batch transaction
/// and a requires_new step beside it), as many for the pending-action job and for the gap-timeout
/// job (a transaction on an instance, and a step beside it), and two for the housekeeping job (its
/// job lock and a batch), which run at the same time on threads of their own (job_schedule.hpp).
inline std::size_t store_pool_size(const relay_options& o) { return o.consumer_threads * 2 + 2 + 2 + 2; }

/// The connections of the operator API's own store: one per serving thread of the HTTP endpoint
/// (http_endpoint.hpp: four) and one for /metrics, so that neither waits for a delivery's
/// connection, nor a delivery for theirs.
constexpr std::size_t api_pool_size = 4 + 1;

[[noreturn]] void misconfigured(const std::string& problem);

/// The consumer configuration of every cluster, with the relay's defaults.
std::vector<kafka::cluster_config> consumer_clusters(const relay_options& o);
/// The producers' properties: o.producer on the default cluster.
kafka::properties producer_properties(const relay_options& o);
/// The declarations, after checking the options that do not need a connection.
declarations<std::string> load(const relay_options& o);
/// `o` with the deduplication windows of the declared sequences.
housekeeping_options declared_windows(housekeeping_options o, const declarations<std::string>& decls);
/// The line of the relay's log a housekeeping run ends with.
std::string describe(const housekeeping_report& r);

}  // namespace seqinbox::relay::detail
