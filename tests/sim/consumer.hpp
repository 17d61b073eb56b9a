#pragma once
// One simulated service instance: an inbox object over the shared store with its own source,
// and the body of its worker task (poll, decide, acknowledge) with the hooks the controller
// uses to inject a listener failure or a crash before the acknowledgement. An action runner is
// one too, whose task runs the pending-action job instead. It reaches the shared store through
// its process's handle (process_store.hpp), which consumers of one process share.
#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "listener_probe.hpp"
#include "process_store.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/outcome.hpp"
#include "seqinbox/propagation/not_supported.hpp"
#include "support/world.hpp"

namespace seqinbox::sim {

template <class Claim>
struct sim_policies : default_policies {
    using claim = Claim;
    using clock = ::seqinbox::clock::manual_clock;
};

template <class Claim, class Store = memory::store>
using sim_inbox = basic_inbox<process_store<Store>, memory::source, memory::error_sink, sim_policies<Claim>>;

/// The claim key a record carries (the header decoder's headers).
inline claim_key key_of(const envelope& record) {
    return {std::string(record.find_header("message-type").value_or("")), std::string(record.find_header("idempotence-id").value_or(""))};
}

/// What the worker tells the controller; written by the task, read between steps (the step
/// driver's hand-over orders the accesses).
struct worker_report {
    std::optional<envelope> current;   ///< the delivery being decided (a batch's first)
    std::size_t batch = 0;             ///< records of the batch being decided (0: one delivery)
    std::size_t batch_retries = 0;     ///< times the current batch did not commit, in a row
    std::size_t batches = 0;           ///< batches that committed
    std::size_t batched = 0;           ///< records decided in them
    std::vector<std::string> errors;   ///< deliver() failures other than a lost connection or a retry
    std::vector<claim_key> acknowledged;  ///< keys acknowledged since the controller last took them
    std::size_t connection_errors = 0;
    std::size_t retryable_errors = 0;  ///< e.g. the instance was removed under the delivery
    std::size_t actions_executed = 0;
    std::array<std::size_t, 6> outcomes{};  ///< by seqinbox::outcome
    std::size_t released = 0;
    std::size_t release_failures = 0;
};

template <class Claim, class Store = memory::store>
class consumer {
public:
    consumer(std::size_t index, process_store<Store>& process, memory::error_sink& sink, const declarations<testing::message>& decls,
             clock::manual_clock clock, listener_probe& probe)
        : index_(index), process_(&process), inbox_(process, source, sink, decls, {.clock = clock}), probe_(&probe) {
        for (const auto& m : decls.sequences.front().messages)
            inbox_.on(m.qualified_type(), [this](const testing::message&, const typename sim_inbox<Claim, Store>::context& ctx) {
                listen(ctx.qualified_type, ctx.idempotence_id, ctx.context_id);
            });
    }
    consumer(const consumer&) = delete;
    consumer& operator=(const consumer&) = delete;

    /// The worker task: decides deliveries until the source is empty, one at a time or, with
    /// `batch_size`, up to that many at once in one transaction (deliver_batch). A delivery (or a
    /// batch) whose decision failed is put back (the consumer seeks to its last acknowledged
    /// offset) and retried.
    void work(std::optional<std::size_t> batch_size = std::nullopt) {
        while (!stopping) {
            const std::vector<envelope> records = batch_size ? source.poll_batch(*batch_size) : polled_one();
            if (records.empty()) return;
            report.current = records.front();
            report.batch = batch_size ? records.size() : 0;
            probe_->begin_delivery(index_);
            if (!(batch_size ? decide_batch(records) : decide(records.front()))) {
                report.batch_retries += batch_size ? 1 : 0;
                source.redeliver_unacknowledged();
                continue;
            }
            report.batch_retries = 0;
            memory::yield_point("ack");
            if (std::exchange(crash_before_ack, false)) {
                source.redeliver_unacknowledged();  // the restarted consumer gets it again
                return;
            }
            for (const auto& record : records) {
                source.acknowledge(record);
                report.acknowledged.push_back(key_of(record));
            }
        }
    }

    /// The action runner's task: one run of the pending-action job.
    void run_actions(std::size_t page_size, std::size_t pages) {
        probe_->begin_delivery(index_);
        guarded([&] { report.actions_executed += inbox_.run_pending_actions(page_size, pages); });
    }

    memory::source source;
    worker_report report;
    bool crash_before_ack = false;  ///< armed by the controller while the task waits at "ack"
    bool stopping = false;          ///< the run is over: finish the current delivery and stop

private:
    std::vector<envelope> polled_one() {
        std::vector<envelope> records;
        if (auto record = source.poll()) records.push_back(std::move(*record));
        return records;
    }

    bool decide(const envelope& record) {
        return guarded([&] { count(inbox_.deliver(record)); });
    }

    bool decide_batch(const std::vector<envelope>& records) {
        return guarded([&] {
            for (const auto& result : inbox_.deliver_batch(records)) count(result);
            ++report.batches;
            report.batched += records.size();
        });
    }

    void count(const delivery_result& result) {
        ++report.outcomes[static_cast<std::size_t>(result.outcome)];
        report.released += result.released;
        report.release_failures += result.release_failures;
    }

    /// Runs `work`; false when it threw (a lost connection and a retryable error are counted,
    /// anything else is reported).
    template <class Work>
    bool guarded(Work work) {
        try {
            work();
            return true;
        } catch (const seqinbox::error& e) {
            if (e.category() == error_category::connection) {
                ++report.connection_errors;
                process_->connection_lost();  // the process has seen it now
            }
            else if (e.category() == error_category::retryable)
                ++report.retryable_errors;
            else
                report.errors.push_back(std::string(to_string(e.category())) + ": " + e.what());
        } catch (const std::exception& e) {
            report.errors.push_back(e.what());
        }
        return false;
    }

    void listen(const std::string& type, const std::string& id, const std::string& context) {
        probe_->enter(index_, {type, id}, context);
        memory::yield_point("listener");
        if (probe_->take_failure(index_)) {
            probe_->leave(index_, false);
            throw std::runtime_error("injected listener failure");
        }
        probe_->leave(index_, true);
    }

    std::size_t index_;
    process_store<Store>* process_;
    sim_inbox<Claim, Store> inbox_;
    listener_probe* probe_;
};

}  // namespace seqinbox::sim
