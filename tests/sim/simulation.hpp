#pragma once
// One run of one seed: simulated consumers sharing one in-memory store, driven one store
// operation at a time by a chooser (seeded draw, or a script for replay and shrinking), with the
// invariants checked after every step and at quiescence. Beside the consumers, the run has task
// slots for the operator: two action runners (inboxes without records), two housekeepers and a
// console that sends action requests.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "batch_checks.hpp"
#include "buffer_checks.hpp"
#include "checker.hpp"
#include "consumer.hpp"
#include "listener_probe.hpp"
#include "numbered_run.hpp"
#include "operations.hpp"
#include "run_types.hpp"
#include "scenario.hpp"
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/step_driver.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"
#include "steps.hpp"
#include "trace_text.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

template <class Claim, class Store = memory::store>
class simulation {
    friend struct trace_text<simulation>;
    static constexpr std::size_t action_runners = 2;
    static constexpr std::size_t housekeepers = 2;
    /// Delivery consumers run two to a process, which share its instance cache; each action
    /// runner is a process of its own.
    static constexpr std::size_t consumers_per_process = 2;
    using housekeeper = basic_housekeeper<Store, memory::error_sink, clock::manual_clock>;

public:
    simulation(const scenario& s, run_options options)
        : scenario_(s), options_(std::move(options)), probe_(s.decls, log_), arrived_(s.work.deliveries.size()),
          delivered_(s.work.messages.size()), tasks_(s.work.consumers + action_runners + housekeepers + 1),
          blocked_(tasks_.size()) {
        for (std::size_t c = 0; c < s.work.consumers + action_runners; ++c) {
            if (c >= s.work.consumers || c % consumers_per_process == 0) processes_.push_back(std::make_unique<process_store<Store>>(store_));
            consumers_.push_back(std::make_unique<consumer<Claim, Store>>(c, *processes_.back(), sink_, s.decls, clock_, probe_, s.required));
        }
        for (std::size_t h = 0; h < housekeepers; ++h) housekeepers_.emplace_back(store_, sink_, housekeeping_of(h), clock_);
        probe_.ask_processed([this](const claim_key& key) { return processed(key); });
        if (s.numbered()) numbered_run_.watch(probe_, nothing_lost_);
    }
    simulation(const simulation&) = delete;
    simulation& operator=(const simulation&) = delete;

    /// Ends every task still running: its connection dies and it stops after its delivery.
    ~simulation() {
        for (auto& c : consumers_) c->stopping = true;
        for (const auto& task : tasks_)
            for (int i = 0; task && i < 100'000 && !driver_.done(*task); ++i) {
                kill_connections(*task);
                driver_.step(*task);
            }
    }

    /// Runs until quiescence, a deadlock or the step budget; `next(sim)` gives each step.
    template <class Chooser>
    run_result run(Chooser& next) {
        while (!quiescent() && applied_.size() < options_.max_steps) {
            log_.at_step(applied_.size());
            if (!unblock_or_report_deadlock()) break;
            const std::optional<step> s = next(*this);
            if (!s) {
                log_.add("stuck", "no step applies but the run is not quiescent");
                break;
            }
            perform(*s);
        }
        finish_run();
        return {std::move(applied_), log_.all(), std::move(trace_), std::move(subjects_), std::move(counts_)};
    }

    // ---- what the choosers ask ----

    std::size_t operands(kind<advance>) const { return tasks_.size(); }
    std::size_t operands(kind<poll_batch>) const { return scenario_.work.consumers; }
    std::size_t operands(kind<arrive>) const { return scenario_.work.deliveries.size(); }
    std::size_t operands(kind<listener_throw>) const { return consumers_.size(); }
    std::size_t operands(kind<lose_connection>) const { return consumers_.size(); }
    std::size_t operands(kind<lose_claim_connection>) const { return consumers_.size(); }
    std::size_t operands(kind<crash_before_ack>) const { return scenario_.work.consumers; }
    std::size_t operands(kind<crash_database>) const { return used_.crashes < limits_.crashes ? memory::testing::unflushed_commits(store_) + 1 : 0; }
    std::size_t operands(kind<lock_table_full>) const { return used_.lock_faults < limits_.lock_faults ? scenario_.work.consumers : 0; }
    std::size_t operands(kind<resend>) const { return sink_.size(); }
    std::size_t operands(kind<request_action>) const { return console_free() ? request_count() : 0; }
    std::size_t operands(kind<run_actions>) const { return action_runners; }
    std::size_t operands(kind<housekeep>) const { return housekeepers; }
    std::size_t operands(kind<pass_time>) const { return 2; }
    std::size_t operands(kind<time_out_gaps>) const { return scenario_.gap_timeout() ? action_runners : 0; }
    std::size_t operands(kind<pass_gap_time>) const { return scenario_.gap_timeout() ? 1 : 0; }

    bool allows(const advance& a) const {
        if (tasks_[a.consumer]) return !blocked_[a.consumer];
        return a.consumer < scenario_.work.consumers && may_work(a.consumer);
    }
    bool allows(const poll_batch& p) const { return p.consumer < scenario_.work.consumers && !tasks_[p.consumer] && may_work(p.consumer); }
    bool allows(const arrive& a) const { return !arrived_[a.delivery] && !options_.dropped.contains(a.delivery); }
    bool allows(const listener_throw& t) const { return at(t.consumer) == "listener" && !probe_.armed(t.consumer); }
    /// A batch runs many more store operations than one delivery: after two connection losses in
    /// a row it is left to commit, or no large batch would ever get through a high fault level.
    bool allows(const lose_connection& l) const {
        const auto where = at(l.consumer);
        const auto& report = consumers_[l.consumer]->report;
        return !where.empty() && where != "ack" && where != "instance.create_or_get" && (report.batch == 0 || report.batch_retries < 2);
    }
    bool allows(const lose_claim_connection& l) const { return allows(lose_connection{l.consumer}); }
    bool allows(const crash_before_ack& c) const { return at(c.consumer) == "ack" && !consumers_[c.consumer]->source.crash_before_ack; }
    /// A batch parked before a savepoint, a stored message or its commit; one that failed twice
    /// in a row is left to commit (as for lost connections).
    bool allows(const lock_table_full& f) const {
        if (f.consumer >= scenario_.work.consumers || used_.lock_faults >= limits_.lock_faults) return false;
        const auto where = at(f.consumer);
        const auto& report = consumers_[f.consumer]->report;
        return report.batch > 0 && report.batch_retries < 2 && (where == "savepoint" || where == "message.store" || where == "commit");
    }
    /// Only while the database holds something a crash can lose: a transaction or an unflushed commit.
    bool allows(const crash_database& c) const {
        const std::size_t unflushed = memory::testing::unflushed_commits(store_);
        return used_.crashes < limits_.crashes && c.keep <= unflushed && (unflushed > 0 || store_.open_transaction_count() > 0);
    }
    bool allows(const resend& r) const { return r.failure < sink_.size() && !resent_.contains(r.failure) && resent_.size() < 10; }
    bool allows(const request_action& r) const { return console_free() && r.target < request_count(); }
    /// Past its limit, the job still runs while actions are pending (it runs periodically).
    bool allows(const run_actions& r) const {
        return r.runner < action_runners && !tasks_[runner_slot(r.runner)] && (used_.action_runs < limits_.action_runs || actions_pending());
    }
    bool allows(const housekeep& h) const {
        return h.runner < housekeepers && !tasks_[housekeeper_slot(h.runner)] && used_.housekeeping_runs < limits_.housekeeping_runs;
    }
    bool allows(const pass_time& p) const { return p.span < 2 && used_.time_jumps < limits_.time_jumps; }
    bool allows(const time_out_gaps& g) const {
        return scenario_.gap_timeout() && g.runner < action_runners && !tasks_[runner_slot(g.runner)] && used_.gap_runs < limits_.gap_runs;
    }
    bool allows(const pass_gap_time& p) const { return scenario_.gap_timeout() && p.span == 0 && used_.gap_jumps < limits_.gap_jumps; }

    bool allows(const step& s) const {
        return std::visit([&](const auto& k) { return allows(k); }, s);
    }

    const scenario& setup() const noexcept { return scenario_; }

private:
    // ---- applying steps ----

    void perform(const step& s) {
        const std::size_t open_before = store_.open_transaction_count();
        const std::string before = options_.trace ? trace_text<simulation>::describe_step(*this, s) : std::string();
        if (options_.trace) subjects_.push_back(trace_text<simulation>::subject(*this, s));
        std::visit([&](const auto& k) { apply(k); }, s);
        forget_derived_state();
        applied_.push_back(s);
        ++counts_["steps"];
        if (store_.open_transaction_count() < open_before) after_commit_or_rollback();
        reap_tasks();
        watch_buffers();
        check_nothing_lost();
        if (options_.trace) trace_.push_back("#" + std::to_string(applied_.size() - 1) + " " + before + trace_text<simulation>::after_step(*this, s));
    }

    void apply(const advance& a) {
        if (!tasks_[a.consumer]) return start(a.consumer, "c" + std::to_string(a.consumer), [c = consumers_[a.consumer].get()] { c->work(); });
        blocked_[a.consumer] = step_task(a.consumer) == memory::task_status::blocked;
        if (blocked_[a.consumer]) ++counts_["blocked_steps"];
    }

    /// Steps the slot's task, with what the checks must see around it: the pending actions an
    /// action runner is about to read, the instances a housekeeper may remove.
    memory::task_status step_task(std::size_t slot) {
        if (is_runner(slot) && at(slot) == "action.read")  // it reads the instance it locked
            probe_.actions_read_by(slot, pending_actions_of(store_, driver_.locked_instances(*tasks_[slot])));
        const bool housekeeping = is_housekeeper(slot);
        if (housekeeping) {
            sunk_.catch_up(sink_);
            removal_.before(store_, sunk_);
        }
        const auto status = driver_.step(*tasks_[slot]);
        forget_derived_state();
        if (housekeeping) after_housekeeping_step();
        return status;
    }

    /// Spawns the slot's task (it runs to its first store operation).
    template <class Body>
    void start(std::size_t slot, std::string name, Body body) {
        tasks_[slot] = driver_.spawn(std::move(name), std::move(body));
        blocked_[slot] = driver_.status(*tasks_[slot]) == memory::task_status::blocked;
    }

    void apply(const poll_batch& p) {
        start(p.consumer, "c" + std::to_string(p.consumer), [c = consumers_[p.consumer].get(), n = scenario_.batch_size] { c->work(n); });
    }

    void apply(const arrive& a) {
        const auto& d = scenario_.work.deliveries[a.delivery];
        consumers_[d.consumer]->source.push(scenario_.work.record_of(d));
        arrived_[a.delivery] = true;
        delivered_[d.message] = true;
        ++counts_["deliveries"];
    }

    void apply(const listener_throw& t) {
        probe_.arm_failure(t.consumer);
        ++counts_["faults_listener_throw"];
    }

    void apply(const lose_connection& l) {
        connection_lost(l.consumer, [&] { kill_connections(*tasks_[l.consumer]); });
    }
    void apply(const lose_claim_connection& l) {
        connection_lost(l.consumer, [&] { driver_.lose_claim_connection(*tasks_[l.consumer]); });
    }

    template <class Kill>
    void connection_lost(std::size_t consumer, Kill kill) {
        const bool in_listener = probe_.inside_listener(consumer);
        const std::string where(at(consumer));
        if (!killed_a_transaction(kill)) return;
        ++counts_["faults_connection_lost"];
        ++counts_["faults_connection_lost_at_" + where];  // what it held: see the labels in memory/store.hpp
        if (in_listener) ++counts_["faults_connection_lost_in_listener"];
        after_connection_lost(consumer);
        std::fill(blocked_.begin(), blocked_.end(), false);
    }

    template <class Kill>
    bool killed_a_transaction(Kill kill) {
        const std::size_t open_before = store_.open_transaction_count();
        kill();
        return store_.open_transaction_count() < open_before;
    }

    /// What the consumer's delivery did that is not durable (judged on the store as it is now)
    /// may be done again. (Its process clears its instance cache when the task sees the error.)
    void after_connection_lost(std::size_t consumer) {
        counts_["at_least_once_windows"] += probe_.connection_lost(consumer, [this](const claim_key& key) { return processed(key); });
    }

    /// The processes whose transactions die see a lost connection; the store then rolls back to
    /// its durable prefix plus `keep` unflushed commits. Every listener success whose state is
    /// not durable after that is in the at-least-once window.
    void apply(const crash_database& c) {
        ++used_.crashes;
        ++counts_["faults_crash_database"];
        const std::size_t unflushed = memory::testing::unflushed_commits(store_);
        counts_["crash_lost_commits"] += unflushed - c.keep;
        std::vector<std::size_t> lost;  // consumers (and runners) that held a transaction
        for (std::size_t slot = 0; slot < consumers_.size(); ++slot)
            if (tasks_[slot] && killed_a_transaction([&] { kill_connections(*tasks_[slot]); })) lost.push_back(slot);
        memory::testing::crash(store_, c.keep);
        store_changed_ = true;
        counts_["crash_connections_lost"] += lost.size();
        for (const auto& row : store_.messages())  // a state step kept, its claim transaction lost: to heal
            if (row.state != message_state::failed && !memory::testing::has_claim(store_, row.key())) ++counts_["crash_rows_without_claim"];
        for (std::size_t slot : lost) after_connection_lost(slot);
        counts_["at_least_once_windows"] += probe_.crash([this](const claim_key& key) { return processed(key); });
        std::fill(blocked_.begin(), blocked_.end(), false);
    }

    void apply(const crash_before_ack& c) {
        consumers_[c.consumer]->source.crash_before_ack = true;
        ++counts_["faults_crash_before_ack"];
    }

    /// The batch's next operation fails and its transaction will not commit: what its listeners
    /// completed runs again (under `required` their writes roll back with it).
    void apply(const lock_table_full& f) {
        ++used_.lock_faults;
        if (driver_.exhaust_lock_table(*tasks_[f.consumer]) == 0) return;
        ++counts_["faults_lock_table"];
        counts_["at_least_once_windows"] += probe_.rolled_back(f.consumer, [this](const claim_key& key) { return processed(key); });
    }

    void apply(const resend& r) {
        envelope again = sink_.records()[r.failure].original;
        again.offset = -1;  // a new record on the topic
        consumers_[r.failure % scenario_.work.consumers]->source.push(std::move(again));
        resent_.insert(r.failure);
        ++counts_["resends"];
    }

    void apply(const request_action& r) {
        const action_request request = action_requests(store_, scenario_.numbered())[r.target];
        ++used_.requests;
        ++counts_["requests_" + request.action_name()];
        start(console_slot(), "operator", [this, request] {
            if (!request.send(store_, clock_.now())) ++counts_["requests_refused"];  // the target is no longer WAITING / OPEN
        });
    }

    void apply(const run_actions& r) {
        ++used_.action_runs;
        ++counts_["action_runs"];
        const std::size_t pages = action_pages_of(r.runner);
        start(runner_slot(r.runner), "r" + std::to_string(r.runner),
              [c = consumers_[runner_slot(r.runner)].get(), pages] { c->run_actions(pages, pages); });
    }

    void apply(const housekeep& h) {
        ++used_.housekeeping_runs;
        ++counts_["housekeeping_runs"];
        start(housekeeper_slot(h.runner), "h" + std::to_string(h.runner), [this, h] { count_housekeeping(housekeepers_[h.runner].run_once(), counts_); });
    }

    void apply(const time_out_gaps& g) {
        ++used_.gap_runs;
        ++counts_["gap_runs"];
        start(runner_slot(g.runner), "g" + std::to_string(g.runner),
              [c = consumers_[runner_slot(g.runner)].get(), page = 1 + g.runner] { c->time_out_gaps(page); });
    }

    void apply(const pass_gap_time&) {
        ++used_.gap_jumps;
        ++counts_["gap_time_jumps"];
        clock_.advance(*scenario_.gap_timeout() + std::chrono::seconds(1));
    }

    void apply(const pass_time& p) {
        ++used_.time_jumps;
        ++counts_["time_jumps"];
        clock_.advance(time_span(p.span));
    }

    /// A housekeeper moved: instances it removed start a new life for their context and keys.
    void after_housekeeping_step() {
        sunk_.catch_up(sink_);
        store_changed_ = true;
        for (auto& gone : removal_.after(store_, sunk_, log_)) {
            ++instances_removed_;
            removed_keys_.insert(gone.keys.begin(), gone.keys.end());
            probe_.instance_removed(gone.context, gone.keys);
        }
    }

    // ---- bookkeeping after a step ----

    /// The buffer bound after every step; a consumer a `reject` made back off notes the committed
    /// state the rejection saw (a rejection commits nothing, and the count and the throw are one
    /// step) and may work again once that state changed.
    void watch_buffers() {
        bool changed = std::exchange(store_changed_, false);  // by a housekeeper or a crash
        for (const auto& p : processes_) {
            counts_["buffer_rows_outside_lock"] += bound_.orphaned(p->take_orphaned_waiting());
            changed = p->take_committed() || changed;
        }
        if (changed) backoff_.state_changed();
        if (changed && bound_.checked()) counts_["buffer_over_limit_excused"] += bound_.run(store_.messages(), log_);
        for (std::size_t c = 0; c < scenario_.work.consumers; ++c) {
            auto& consumer = *consumers_[c];
            if (backoff_.take_reject(c, consumer.overflows, store_) && consumer.report.batch > 0)
                batch_rejected(c, scenario_.required, probe_, [this](const claim_key& key) { return processed(key); }, counts_, log_);
            if (consumer.backing_off && !tasks_[c] && backoff_.changed_since_reject(c, store_)) {
                consumer.backing_off = false;
                ++counts_["buffer_reject_retries"];
            }
        }
    }

    /// A consumer without a task may start its worker: records, and not backing off.
    bool may_work(std::size_t c) const { return consumers_[c]->source.pending() > 0 && !consumers_[c]->backing_off; }

    /// Keys of deliveries still in a source at the end (a `reject` left them there), counted.
    std::set<claim_key> left_in_sources() {
        std::set<claim_key> keys;
        for (std::size_t c = 0; c < scenario_.work.consumers; ++c)
            for (const auto& key : consumers_[c]->source.pending_keys()) {
                keys.insert(key);
                ++counts_["buffer_rejects_left_in_source"];
            }
        return keys;
    }

    /// A transaction ended: committed state may have changed and waiting tasks may go on.
    void after_commit_or_rollback() {
        const auto rows = store_.messages();
        unique_rows_.run(rows, probe_, log_);
        own_instance_.run(store_, rows, log_);
        numbered_run_.check_rows(rows, log_);
        std::fill(blocked_.begin(), blocked_.end(), false);
    }

    /// Takes the keys acknowledged in this step, then checks that no accepted message is lost.
    void check_nothing_lost() {
        for (auto& c : consumers_) {
            for (const auto& key : c->source.acknowledged) nothing_lost_.accept(key);
            c->source.acknowledged.clear();
        }
        sunk_.catch_up(sink_);
        numbered_run_.observe();
        nothing_lost_.run(store_, sunk_, probe_, log_);
        store_errors_.run(sink_, log_);
    }

    void reap_tasks() {
        for (const auto& p : processes_)
            for (auto& [kind, text] : p->take_violations()) log_.add(std::move(kind), std::move(text));
        for (std::size_t c = 0; c < tasks_.size(); ++c) {
            if (c < consumers_.size()) report_errors(c);
            if (!tasks_[c] || !driver_.done(*tasks_[c])) continue;
            if (driver_.status(*tasks_[c]) == memory::task_status::failed)
                log_.add("worker_died", "c" + std::to_string(c) + ": " + trace_text<simulation>::failure_text(driver_.failure(*tasks_[c])));
            tasks_[c].reset();
            std::fill(blocked_.begin(), blocked_.end(), false);
        }
    }

    /// A retryable error is expected only where housekeeping removed an instance under a delivery.
    void report_errors(std::size_t c) {
        auto& report = consumers_[c]->report;
        for (const auto& e : report.errors) log_.add("delivery_error", "c" + std::to_string(c) + ": " + e);
        report.errors.clear();
        for (auto& [kind, text] : std::exchange(report.violations, {})) log_.add(std::move(kind), std::move(text));
        for (auto& fault : std::exchange(consumers_[c]->source.faults, {})) log_.add("source_misuse", "c" + std::to_string(c) + ": " + fault);
        if (report.retryable_errors > 0 && instances_removed_ == 0)
            log_.add("delivery_error", "c" + std::to_string(c) + ": a retryable error, but no instance was removed");
        counts_["retries_after_removal"] += std::exchange(report.retryable_errors, 0);
    }

    /// Tasks flagged blocked are stepped again once every live task is flagged; false when they
    /// all stay blocked: a deadlock (the in-memory store, like a test, waits forever).
    bool unblock_or_report_deadlock() {
        bool any_live = false;
        for (std::size_t c = 0; c < tasks_.size(); ++c) {
            if (tasks_[c] && !blocked_[c]) return true;
            any_live = any_live || tasks_[c].has_value();
        }
        if (!any_live) return true;
        std::string where;
        for (std::size_t c = 0; c < tasks_.size(); ++c) {
            if (!tasks_[c]) continue;
            blocked_[c] = step_task(c) == memory::task_status::blocked;
            if (!blocked_[c]) return true;
            where += " c" + std::to_string(c) + "@" + std::string(driver_.position(*tasks_[c]));
        }
        if (break_batch_deadlock()) return true;
        log_.add("deadlock", "every live task is blocked:" + where);
        return false;
    }

    /// PostgreSQL's deadlock detector. A batch claims its keys in key order round by round, so
    /// that two batches (or a batch and a delivery) can wait for each other across rounds; the
    /// server then aborts one of the transactions (SQLSTATE 40P01) and that batch is delivered
    /// again. Here the claim transaction of a blocked batch dies; a cycle without a batch stays a
    /// deadlock violation (deliveries one at a time never form one).
    bool break_batch_deadlock() {
        for (std::size_t c = 0; c < scenario_.work.consumers; ++c) {
            if (!tasks_[c] || consumers_[c]->report.batch == 0) continue;
            if (!killed_a_transaction([&] { driver_.lose_claim_connection(*tasks_[c]); })) continue;
            ++counts_["deadlocks_broken"];
            after_connection_lost(c);
            std::fill(blocked_.begin(), blocked_.end(), false);
            return true;
        }
        return false;
    }

    bool quiescent() const {
        for (std::size_t d = 0; d < arrived_.size(); ++d)
            if (!arrived_[d] && !options_.dropped.contains(d)) return false;
        if (std::ranges::any_of(tasks_, [](const auto& task) { return task.has_value(); }) || actions_pending()) return false;
        // A consumer backing off keeps its records: nothing is left to change the state it waits for.
        return std::ranges::none_of(consumers_, [](const auto& c) { return c->source.in_flight() > 0 || (c->source.pending() > 0 && !c->backing_off); });
    }

    void finish_run() {
        log_.at_step(applied_.size() == 0 ? 0 : applied_.size() - 1);
        if (!quiescent()) {
            if (log_.empty()) log_.add("no_quiescence", "not quiescent after " + std::to_string(applied_.size()) + " steps");
        } else {
            check_nothing_lost();
            own_instance_.run(store_, store_.messages(), log_);
            const bool connection_lost = counts_["faults_connection_lost"] + counts_["faults_crash_database"] + counts_["deadlocks_broken"] > 0;
            const std::set<claim_key> in_source = left_in_sources();
            final_state_check({store_, sink_, probe_, scenario_.decls, writes_claims<Claim>, connection_lost, removed_keys_, in_source, numbered_run_.skipped_number()}, log_)
                .run(scenario_.work, delivered_);
            if (scenario_.numbered()) numbered_run_.check_at_end(probe_, connection_lost, log_);
            check_overflow_dead_letters(store_, sink_, probe_, log_, numbered_run_.skipped_number());
            if (scenario_.required) check_effects_once(store_, probe_, scenario_.work, delivered_, removed_keys_, log_);
        }
        count_outcomes();
        if (counts_["lock_table_errors"] > counts_["faults_lock_table"] + counts_["lock_table_exhausted"])
            log_.add("delivery_error", "more SQLSTATE 53200 errors than lock tables found full");
    }

    void count_outcomes() {
        for (const auto& c : consumers_) c->add_counts(counts_);
        counts_["operator_replays"] += probe_.operator_replays();
        counts_["instances_removed"] += instances_removed_;
        for (const auto& p : processes_) {
            counts_["instance_cache_stale_locks"] += p->stale_locks();
            counts_["pool_second_leases"] += p->second_leases();
            counts_["batch_parts"] += p->batch_parts();
        }
        counts_["lock_table_exhausted"] += memory::testing::lock_table_exhausted(store_);
        ++counts_[scenario_.required ? "seeds_required" : "seeds_not_supported"];
        if (scenario_.numbered()) ++counts_["seeds_numbered"];
        for (const auto& m : scenario_.work.messages)
            if (probe_.successes(m.key()) > 1) ++counts_["at_least_once_repeats"];
    }

    // ---- helpers ----

    std::size_t runner_slot(std::size_t runner) const { return scenario_.work.consumers + runner; }
    bool is_runner(std::size_t slot) const { return slot >= scenario_.work.consumers && slot < consumers_.size(); }
    std::size_t housekeeper_slot(std::size_t runner) const { return consumers_.size() + runner; }
    bool is_housekeeper(std::size_t slot) const { return slot >= consumers_.size() && slot < console_slot(); }
    std::size_t console_slot() const { return consumers_.size() + housekeepers; }
    /// An action waits for the job: a run did not get to it, or lost its connection before clearing it.
    bool actions_pending() const {
        if (!actions_pending_) actions_pending_ = !store_.instances_with_pending_actions(1).empty();
        return *actions_pending_;
    }
    bool console_free() const { return !tasks_[console_slot()] && used_.requests < limits_.requests; }

    /// How many requests an operator may make in the current state.
    std::size_t request_count() const {
        if (!request_count_) request_count_ = action_request_count(store_, scenario_.numbered());
        return *request_count_;
    }
    /// What the choosers ask is derived from the store once per state: a step changes the state.
    void forget_derived_state() {
        request_count_.reset();
        actions_pending_.reset();
    }

    /// Every open transaction of the task dies, as step_driver::lose_connection documents.
    void kill_connections(memory::step_driver::task_id task) { driver_.lose_connection(task); }

    /// Where the consumer's task is parked ("" without a task).
    std::string_view at(std::size_t consumer) const {
        return tasks_[consumer] ? driver_.position(*tasks_[consumer]) : std::string_view();
    }

    bool processed(const claim_key& key) const {
        return std::ranges::any_of(store_.messages_with_key(key), [](const auto& r) { return r.state == message_state::processed; });
    }

    const scenario& scenario_;
    run_options options_;
    violation_log log_;
    tally counts_;
    Store store_{scenario_.store_options()};
    memory::error_sink sink_;
    clock::manual_clock clock_;
    listener_probe probe_;

    unique_rows_check unique_rows_;
    store_error_check store_errors_;
    own_instance_check own_instance_{scenario_.work};
    buffer_bound_check bound_{scenario_.decls.sequences.front().buffer};
    backoff_watch backoff_{scenario_.work.consumers};
    bool store_changed_ = false;  // a housekeeper's step or a crash: see watch_buffers
    sink_index sunk_;
    nothing_lost_check nothing_lost_;
    numbered_run numbered_run_{store_, sunk_, scenario_};
    removal_check removal_;
    std::set<claim_key> removed_keys_;  // keys whose instance housekeeping removed
    std::size_t instances_removed_ = 0;
    operation_limits limits_;
    operation_limits used_{0, 0, 0, 0, 0, 0, 0, 0};
    mutable std::optional<std::size_t> request_count_;  // derived state, see forget_derived_state
    mutable std::optional<bool> actions_pending_;
    std::vector<std::unique_ptr<process_store<Store>>> processes_;  // before the consumers, which use them
    std::vector<std::unique_ptr<consumer<Claim, Store>>> consumers_;  // delivery consumers, then action runners
    std::vector<housekeeper> housekeepers_;
    std::vector<bool> arrived_;    // by planned delivery
    std::vector<bool> delivered_;  // by logical message: at least one copy arrived
    std::set<std::size_t> resent_;
    std::vector<std::optional<memory::step_driver::task_id>> tasks_;  // by consumer, then housekeeper, then console
    std::vector<bool> blocked_;    // by consumer: its last step found it blocked
    std::vector<step> applied_;
    std::vector<std::string> trace_;
    std::vector<std::optional<claim_key>> subjects_;
    memory::step_driver driver_{store_};  // last: destroyed first, its tasks use the members above
};

}  // namespace seqinbox::sim
