#pragma once
// Redrive: dead letters copied back to an input topic with their original key, value and headers
// (the failure headers taken off), each copy recorded in a ledger topic so that a second run does
// not copy it again (`seqinbox redrive`).
//
// A run reads the ledger to its end, then the dead-letter topic from its beginning to the end it
// had when the run started, every partition. A copy is acknowledged before its ledger entry is
// written: a run that dies between the two copies that record again next time (at least once; an
// inbox reading the target topic skips the second copy as a duplicate of its idempotence id).
// Not thread-safe: one run on one thread; two runs at once may both copy a record.
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "seqinbox/failure_kind.hpp"
#include "seqinbox/kafka/properties.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::kafka {

/// Which dead letters to copy; every criterion given must hold.
struct redrive_selection {
    std::optional<failure_kind> kind;  ///< the seqinbox-failure-kind header
    std::optional<std::string> type;   ///< the seqinbox-type header (qualified type)
    std::optional<timestamp> since;    ///< the dead letter's record time at or after it
};

struct redrive_options {
    /// librdkafka properties of the reading consumer and the copying producer; bootstrap.servers
    /// is required (idempotence and acks=all are forced on the producer).
    properties client{};
    std::string from{};    ///< the dead-letter topic
    std::string to{};      ///< the input topic the copies go to
    std::string ledger{};  ///< what was copied; empty: `<from>.redriven`. Create it (one partition, compacted); a broker that auto-creates topics makes it on first use.
    redrive_selection select{};
    bool dry_run = false;  ///< count only: copy nothing, record nothing
    std::chrono::milliseconds timeout{30000};  ///< for each broker answer (metadata, reads, acknowledgements)
};

struct redrive_report {
    std::size_t read = 0;            ///< dead letters read
    std::size_t selected = 0;        ///< of those, matching the selection
    std::size_t copied = 0;          ///< copied now (dry run: would have been)
    std::size_t already_copied = 0;  ///< selected, and in the ledger from an earlier run
    std::size_t omitted = 0;         ///< selected, but the sink had to leave out value, key or headers
    std::map<std::string, std::size_t> copied_by_kind;  ///< kind name ("" when the header is missing)
};

/// The ledger topic of `options` (its own, or `<from>.redriven`).
std::string ledger_topic_of(const redrive_options& options);

/// Runs one redrive. Throws seqinbox::error: configuration for a missing topic or bad property
/// (naming it), retryable when the cluster does not answer within the timeout.
redrive_report redrive(const redrive_options& options);

}  // namespace seqinbox::kafka
