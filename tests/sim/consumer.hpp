#pragma once
// One simulated service instance: an inbox object over the shared store with its own source,
// and the body of its worker task (poll, decide, acknowledge) with the hooks the controller
// uses to inject a listener failure or a crash before an acknowledgement (sim_source.hpp). An
// action runner is one too, whose task runs the pending-action job instead. It reaches the
// shared store through its process's handle (process_store.hpp), which consumers of one process
// share, and tells the handle what its task is (the pool it may use). The seed chooses the
// propagation: under `required` every listener counts its run in a business row of the claim
// transaction, so that the end check sees that each committed once.
#include <algorithm>
#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "buffer_checks.hpp"
#include "listener_probe.hpp"
#include "process_store.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/outcome.hpp"
#include "seqinbox/propagation/not_supported.hpp"
#include "seqinbox/propagation/required.hpp"
#include "sim_source.hpp"
#include "support/world.hpp"

namespace seqinbox::sim {

template <class Claim, class Propagation>
struct sim_policies : default_policies {
    using claim = Claim;
    using clock = ::seqinbox::clock::manual_clock;
    using propagation = Propagation;
    using metrics = overflow_metrics;
};

template <class Claim, class Store = memory::store, class Propagation = ::seqinbox::propagation::not_supported>
using sim_inbox = basic_inbox<process_store<Store>, sim_source, memory::error_sink, sim_policies<Claim, Propagation>>;

/// What the worker tells the controller; written by the task, read between steps (the step
/// driver's hand-over orders the accesses).
struct worker_report {
    std::optional<envelope> current;   ///< the delivery being decided (a batch's first)
    std::size_t batch = 0;             ///< records of the batch being decided (0: one delivery)
    std::size_t batch_retries = 0;     ///< times the current batch did not commit, in a row
    std::size_t batches = 0;           ///< batches that committed
    std::size_t batched = 0;           ///< records decided in them
    std::vector<std::string> errors;   ///< deliver() failures other than a lost connection or a retry
    std::vector<std::pair<std::string, std::string>> violations;  ///< what the worker saw the engine do wrong (kind, text)
    std::size_t connection_errors = 0;
    std::size_t retryable_errors = 0;   ///< e.g. the instance was removed under the delivery
    std::size_t buffer_rejects = 0;     ///< deliveries (or batch parts) refused by a full buffer's `reject`
    std::size_t lock_table_errors = 0;  ///< SQLSTATE 53200: the lock table was full
    std::size_t actions_executed = 0;
    std::size_t gaps_timed_out = 0;     ///< instances the gap-timeout job applied a gap policy to
    std::array<std::size_t, 6> outcomes{};  ///< by seqinbox::outcome
    std::size_t released = 0;
    std::size_t release_failures = 0;
};

/// The business row a listener under propagation::required writes in its `run`-th invocation (one
/// write, no read: a step fewer).
inline std::string effect_key(const claim_key& key, std::size_t run) {
    return "effect:" + key.type + "/" + key.idempotence_id + "#" + std::to_string(run);
}

template <class Claim, class Store = memory::store>
class consumer {
    using not_supported_inbox = sim_inbox<Claim, Store, ::seqinbox::propagation::not_supported>;
    using required_inbox = sim_inbox<Claim, Store, ::seqinbox::propagation::required>;

public:
    consumer(std::size_t index, process_store<Store>& process, memory::error_sink& sink, const declarations<testing::message>& decls,
             clock::manual_clock clock, listener_probe& probe, bool required)
        : index_(index), required_(required), process_(&process), probe_(&probe) {
        if (required)
            listen_on(required_inbox_.emplace(process, source, sink, decls,
                                              typename required_inbox::policy_objects{.clock = clock, .metrics = overflow_metrics(overflows)}),
                      decls);
        else
            listen_on(inbox_.emplace(process, source, sink, decls,
                                     typename not_supported_inbox::policy_objects{.clock = clock, .metrics = overflow_metrics(overflows)}),
                      decls);
    }
    consumer(const consumer&) = delete;
    consumer& operator=(const consumer&) = delete;

    /// The worker task: decides deliveries until the source is empty, one at a time or, with
    /// `batch_size`, up to that many at once with poll_batch (in parts of at most the store's
    /// max_batch_records, each acknowledged once it committed). A delivery whose decision failed
    /// is put back (a batch's by poll_batch itself) and retried; one a full buffer rejected is
    /// put back and the worker backs off (ends) until the controller sees the store change.
    void work(std::optional<std::size_t> batch_size = std::nullopt) {
        const task_scope role(*process_, role_of(batch_size.has_value()));
        while (!stopping && source.pending() > 0) {
            report.current = *source.next();
            report.batch = batch_size ? std::min(*batch_size, source.pending()) : 0;
            probe_->begin_delivery(index_);
            try {
                if (batch_size ? decide_batch(*batch_size) : decide(*source.poll())) {
                    report.batch_retries = 0;
                    continue;
                }
            } catch (const consumer_crash&) {
                source.redeliver_unacknowledged();  // the restarted consumer gets it again
                return;
            }
            report.batch_retries += batch_size ? 1 : 0;
            source.redeliver_unacknowledged();
            if (backing_off) return;
        }
    }

    /// The action runner's task: one run of the pending-action job.
    void run_actions(std::size_t page_size, std::size_t pages) {
        const task_scope role(*process_, role_of(false, "r"));
        probe_->begin_delivery(index_);
        overflows.gap_skipped.clear();
        guarded([&] { with_inbox([&](auto& inbox) { report.actions_executed += inbox.run_pending_actions(page_size, pages); }); });
    }

    /// The action runner's task: one run of the gap-timeout job (numbered seeds), small pages.
    void time_out_gaps(std::size_t page_size) {
        const task_scope role(*process_, role_of(false, "g"));
        probe_->begin_gap_run(index_);
        overflows.gap_skipped.clear();
        guarded([&] { with_inbox([&](auto& inbox) { report.gaps_timed_out += inbox.run_gap_timeouts(page_size, 2); }); });
    }

    /// Adds what the consumer's report, source and overflows counted to the run's counts.
    void add_counts(tally& counts) const {
        counts["outcome_processed"] += report.outcomes[static_cast<std::size_t>(outcome::processed)];
        counts["outcome_buffered"] += report.outcomes[static_cast<std::size_t>(outcome::buffered)];
        counts["outcome_duplicate"] += report.outcomes[static_cast<std::size_t>(outcome::duplicate)];
        counts["outcome_failed"] += report.outcomes[static_cast<std::size_t>(outcome::failed)];
        counts["batches"] += report.batches;
        counts["batched_deliveries"] += report.batched;
        counts["released"] += report.released;
        counts["release_failures"] += report.release_failures;
        counts["connection_errors"] += report.connection_errors;
        counts["lock_table_errors"] += report.lock_table_errors;
        counts["buffer_rejects"] += report.buffer_rejects;
        count_overflows(overflows, counts);
        counts["batch_records_given_back"] += source.given_back;
        counts["actions_executed"] += report.actions_executed;
        counts["gap_timeouts"] += report.gaps_timed_out;
    }

    sim_source source;
    worker_report report;
    bool stopping = false;  ///< the run is over: finish the current delivery and stop
    /// A full buffer rejected the delivery: retrying before the committed state changes would be
    /// rejected again (the Kafka source's backoff). Set by the task, cleared by the controller.
    bool backing_off = false;
    overflow_log overflows;

private:
    /// The calling task's role in its process's pool, while it lives.
    class task_scope {
    public:
        task_scope(process_store<Store>& process, task_role role) : process_(&process) { process.task_started(std::move(role)); }
        task_scope(const task_scope&) = delete;
        task_scope& operator=(const task_scope&) = delete;
        ~task_scope() { process_->task_ended(); }

    private:
        process_store<Store>* process_;
    };

    /// A batch holds one pooled connection; one delivery (or an action run) two: its state step
    /// beside the claim transaction, or under `required` a failure's FAILED row (durable before
    /// the error sink hears of it) and a failed replay's state, each on a connection of its own.
    task_role role_of(bool batch, const char* prefix = "c") const {
        const std::string name = prefix + std::to_string(index_) + (batch ? " (batch worker, " : " (") +
                                 (required_ ? "required)" : "not_supported)");
        if (batch) return {name, 1, "connection_pool", true, process_->max_batch_records(required_)};
        return {name, 2u, "connection_pool", false, 0};
    }

    template <class Inbox>
    void listen_on(Inbox& inbox, const declarations<testing::message>& decls) {
        for (const auto& m : decls.sequences.front().messages)
            inbox.on(m.qualified_type(), [this](const testing::message&, const typename Inbox::context& ctx) {
                listen({ctx.qualified_type, ctx.idempotence_id}, ctx.context_id, ctx.transaction);
            });
    }

    template <class Work>
    void with_inbox(Work work) {
        if (required_inbox_) work(*required_inbox_);
        else work(*inbox_);
    }

    bool decide(const envelope& record) {
        if (!guarded([&] { with_inbox([&](auto& inbox) { count(inbox.deliver(record)); }); })) return false;
        source.acknowledge(record);
        return true;
    }

    /// A part that did not commit must be given back with the rest by poll_batch itself.
    bool decide_batch(std::size_t batch_size) {
        const bool committed = guarded([&] {
            with_inbox([&](auto& inbox) {
                const auto results = inbox.poll_batch(batch_size);
                for (const auto& result : results) count(result);
                ++report.batches;
                report.batched += results.size();
            });
        });
        if (!committed && source.in_flight() > 0)
            report.violations.push_back({"batch_not_given_back", "c" + std::to_string(index_) + ": poll_batch failed and left " +
                                                                     std::to_string(source.in_flight()) + " records in flight"});
        return committed;
    }

    void count(const delivery_result& result) {
        ++report.outcomes[static_cast<std::size_t>(result.outcome)];
        report.released += result.released;
        report.release_failures += result.release_failures;
    }

    /// Runs `work`; false when it threw (a lost connection, a retryable error and a full lock
    /// table are counted, anything else is reported).
    template <class Work>
    bool guarded(Work work) {
        overflows.rejecting = false;  // only this attempt's rejection explains its retryable error
        try {
            work();
            return true;
        } catch (const seqinbox::error& e) {
            if (e.category() == error_category::connection) {
                ++report.connection_errors;
                process_->connection_lost();  // the process has seen it now
            } else if (e.category() == error_category::retryable && std::exchange(overflows.rejecting, false)) {
                ++report.buffer_rejects;
                backing_off = true;
            } else if (e.category() == error_category::retryable && e.sqlstate() == "53200") {
                ++report.lock_table_errors;
            } else if (e.category() == error_category::retryable) {
                ++report.retryable_errors;
            } else {
                report.errors.push_back(std::string(to_string(e.category())) + ": " + e.what());
            }
        } catch (const std::exception& e) {
            report.errors.push_back(e.what());
        }
        return false;
    }

    /// Under `required` the listener records its run in T1 first: a failure (or T1's end without
    /// a commit) must undo that.
    template <class Transaction>
    void listen(const claim_key& key, const std::string& context, Transaction* tx) {
        if (overflows.gap_skipped.contains(context)) probe_->allow_gap(index_, context);
        probe_->enter(index_, key, context);
        if (tx != nullptr) {
            try {
                tx->put(effect_key(key, probe_->entered(key)), "done");
            } catch (...) {  // T1's connection died under it
                probe_->leave(index_, false);
                throw;
            }
        }
        memory::yield_point("listener");
        if (probe_->take_failure(index_)) {
            probe_->leave(index_, false);
            throw std::runtime_error("injected listener failure");
        }
        probe_->leave(index_, true);
    }

    std::size_t index_;
    bool required_;
    process_store<Store>* process_;
    listener_probe* probe_;
    std::optional<not_supported_inbox> inbox_;       // the one the seed's propagation chose
    std::optional<required_inbox> required_inbox_;
};

}  // namespace seqinbox::sim
