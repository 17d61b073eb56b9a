#pragma once
// The checks of issue 33's batch defects beside the guarantees (checker.hpp): a store error is
// never a listener's failure (no error-sink record carries one), and under propagation::required
// every message's listener committed its business write exactly as often as its state says
// (once if PROCESSED, never otherwise): a batch part that did not commit, however it failed,
// took its listeners' writes with it, and its records were decided once when it came again.
#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "consumer.hpp"
#include "listener_probe.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"
#include "violation.hpp"
#include "workload.hpp"

namespace seqinbox::sim {

/// No error-sink record is the store's own error (53200, or a statement refused in the aborted
/// transaction that followed it) dead-lettered as a listener's failure (defect 3 of issue 33).
/// Checked after every step, on the records added since.
class store_error_check {
public:
    void run(const memory::error_sink& sink, violation_log& log) {
        if (sink.size() == seen_) return;
        const auto records = sink.records();
        for (; seen_ < records.size(); ++seen_)
            for (const std::string_view text : {"out of shared memory", "commands ignored until end of transaction block"})
                if (records[seen_].reason.find(text) != std::string::npos)
                    log.add("store_error_dead_lettered", listener_probe::text({records[seen_].qualified_type, records[seen_].idempotence_id}) +
                                                             " reached the error sink with a store error: " + records[seen_].reason);
    }

private:
    std::size_t seen_ = 0;
};

/// Under propagation::required, at quiescence: the business write of every delivered message's
/// listener committed once if its row is PROCESSED (never if an operator expired it), never if
/// FAILED or WAITING. Keys housekeeping removed (their listener may run again in a new instance)
/// and keys with several rows (reported elsewhere) are left out.
inline void check_effects_once(const memory::store& store, const listener_probe& probe, const workload& w, const std::vector<bool>& delivered,
                               const std::set<claim_key>& removed, violation_log& log) {
    for (std::size_t m = 0; m < w.messages.size(); ++m) {
        const claim_key key = w.messages[m].key();
        const auto rows = store.messages_with_key(key);
        if (!delivered[m] || removed.contains(key) || rows.size() != 1) continue;
        std::size_t committed = 0;
        for (std::size_t run = 1; run <= probe.entered(key); ++run) committed += memory::testing::kv_get(store, effect_key(key, run)) ? 1 : 0;
        const bool processed = rows.front().state == message_state::processed;
        const bool expected = processed ? committed == 1 || (committed == 0 && probe.expire_target(key)) : committed == 0;
        if (!expected)
            log.add("effect_not_once", listener_probe::text(key) + " is " + std::string(to_string(rows.front().state)) +
                                           " and its listener's write in the claim transaction committed " + std::to_string(committed) + " times");
    }
}

}  // namespace seqinbox::sim
