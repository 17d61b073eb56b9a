#pragma once
// One run of one seed: simulated consumers sharing one in-memory store, driven one store
// operation at a time by a chooser (seeded draw, or a script for replay and shrinking), with the
// invariants checked after every step and at quiescence.
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

#include "checker.hpp"
#include "consumer.hpp"
#include "listener_probe.hpp"
#include "scenario.hpp"
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/step_driver.hpp"
#include "seqinbox/memory/store.hpp"
#include "steps.hpp"
#include "violation.hpp"

namespace seqinbox::sim {

/// Named counters; the program prints them as `name value` lines.
using tally = std::map<std::string, std::uint64_t>;

/// A claim strategy that writes claim rows; the others are exempt from the live-claim check.
template <class Claim>
inline constexpr bool writes_claims = std::is_same_v<Claim, claim::insert_first>;

struct run_options {
    std::size_t max_steps = 20'000;
    bool trace = false;                  ///< describe every step (for printing a failing run)
    std::set<std::size_t> dropped;       ///< planned deliveries left out (shrinking)
};

struct run_result {
    std::vector<step> steps;             ///< the steps applied, in order: the replayable script
    std::vector<violation> violations;
    std::vector<std::string> trace;      ///< one line per step when run_options::trace
    std::vector<std::optional<claim_key>> subjects;  ///< per step, with trace: the message it works on
    tally counts;
};

template <class Claim>
class simulation {
public:
    simulation(const scenario& s, run_options options)
        : scenario_(s), options_(std::move(options)), probe_(s.decls, log_), arrived_(s.work.deliveries.size()),
          delivered_(s.work.messages.size()), tasks_(s.work.consumers), blocked_(s.work.consumers) {
        for (std::size_t c = 0; c < s.work.consumers; ++c)
            consumers_.push_back(std::make_unique<consumer<Claim>>(c, store_, sink_, s.decls, clock_, probe_));
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

    std::size_t operands(kind<advance>) const { return consumers_.size(); }
    std::size_t operands(kind<arrive>) const { return scenario_.work.deliveries.size(); }
    std::size_t operands(kind<listener_throw>) const { return consumers_.size(); }
    std::size_t operands(kind<lose_connection>) const { return consumers_.size(); }
    std::size_t operands(kind<lose_claim_connection>) const { return consumers_.size(); }
    std::size_t operands(kind<crash_before_ack>) const { return consumers_.size(); }
    std::size_t operands(kind<resend>) const { return sink_.size(); }

    bool allows(const advance& a) const {
        if (tasks_[a.consumer]) return !blocked_[a.consumer];
        return consumers_[a.consumer]->source.pending() > 0;
    }
    bool allows(const arrive& a) const { return !arrived_[a.delivery] && !options_.dropped.contains(a.delivery); }
    bool allows(const listener_throw& t) const { return at(t.consumer) == "listener" && !probe_.armed(t.consumer); }
    bool allows(const lose_connection& l) const {
        const auto where = at(l.consumer);
        return !where.empty() && where != "ack" && where != "instance.create_or_get";
    }
    bool allows(const lose_claim_connection& l) const { return allows(lose_connection{l.consumer}); }
    bool allows(const crash_before_ack& c) const { return at(c.consumer) == "ack" && !consumers_[c.consumer]->crash_before_ack; }
    bool allows(const resend& r) const { return r.failure < sink_.size() && !resent_.contains(r.failure) && resent_.size() < 10; }

    bool allows(const step& s) const {
        return std::visit([this](const auto& k) { return allows(k); }, s);
    }

    const scenario& setup() const noexcept { return scenario_; }

private:
    // ---- applying steps ----

    void perform(const step& s) {
        const std::size_t open_before = store_.open_transaction_count();
        const std::string before = options_.trace ? describe_step(s) : std::string();
        if (options_.trace) subjects_.push_back(subject(s));
        std::visit([this](const auto& k) { apply(k); }, s);
        applied_.push_back(s);
        ++counts_["steps"];
        if (store_.open_transaction_count() < open_before) after_commit_or_rollback();
        reap_tasks();
        if (options_.trace) trace_.push_back("#" + std::to_string(applied_.size() - 1) + " " + before + after_step(s));
    }

    void apply(const advance& a) {
        auto& task = tasks_[a.consumer];
        memory::task_status status;
        if (!task) {
            task = driver_.spawn("c" + std::to_string(a.consumer), [c = consumers_[a.consumer].get()] { c->work(); });
            status = driver_.status(*task);
        } else {
            status = driver_.step(*task);
        }
        blocked_[a.consumer] = status == memory::task_status::blocked;
        if (blocked_[a.consumer]) ++counts_["blocked_steps"];
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
        const std::size_t open_before = store_.open_transaction_count();
        const bool in_listener = probe_.inside_listener(consumer);
        const std::string where(at(consumer));
        kill();
        if (store_.open_transaction_count() == open_before) return;  // it held no transaction
        ++counts_["faults_connection_lost"];
        ++counts_["faults_connection_lost_at_" + where];  // what it held: see the labels in memory/store.hpp
        if (in_listener) ++counts_["faults_connection_lost_in_listener"];
        counts_["at_least_once_windows"] += probe_.connection_lost(consumer, [this](const claim_key& key) { return processed(key); });
        std::fill(blocked_.begin(), blocked_.end(), false);
    }

    void apply(const crash_before_ack& c) {
        consumers_[c.consumer]->crash_before_ack = true;
        ++counts_["faults_crash_before_ack"];
    }

    void apply(const resend& r) {
        envelope again = sink_.records()[r.failure].original;
        again.offset = -1;  // a new record on the topic
        consumers_[r.failure % consumers_.size()]->source.push(std::move(again));
        resent_.insert(r.failure);
        ++counts_["resends"];
    }

    // ---- bookkeeping after a step ----

    /// A transaction ended: committed state may have changed and waiting tasks may go on.
    void after_commit_or_rollback() {
        unique_rows_.run(store_, probe_, log_);
        std::fill(blocked_.begin(), blocked_.end(), false);
    }

    void reap_tasks() {
        for (std::size_t c = 0; c < tasks_.size(); ++c) {
            report_errors(c);
            if (!tasks_[c] || !driver_.done(*tasks_[c])) continue;
            if (driver_.status(*tasks_[c]) == memory::task_status::failed)
                log_.add("worker_died", "c" + std::to_string(c) + ": " + failure_text(driver_.failure(*tasks_[c])));
            tasks_[c].reset();
            std::fill(blocked_.begin(), blocked_.end(), false);
        }
    }

    void report_errors(std::size_t c) {
        auto& errors = consumers_[c]->report.errors;
        for (const auto& e : errors) log_.add("delivery_error", "c" + std::to_string(c) + ": " + e);
        errors.clear();
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
            blocked_[c] = driver_.step(*tasks_[c]) == memory::task_status::blocked;
            if (!blocked_[c]) return true;
            where += " c" + std::to_string(c) + "@" + std::string(driver_.position(*tasks_[c]));
        }
        log_.add("deadlock", "every live task is blocked:" + where);
        return false;
    }

    bool quiescent() const {
        for (std::size_t d = 0; d < arrived_.size(); ++d)
            if (!arrived_[d] && !options_.dropped.contains(d)) return false;
        for (std::size_t c = 0; c < consumers_.size(); ++c)
            if (tasks_[c] || consumers_[c]->source.pending() > 0 || consumers_[c]->source.in_flight() > 0) return false;
        return true;
    }

    void finish_run() {
        log_.at_step(applied_.size() == 0 ? 0 : applied_.size() - 1);
        if (!quiescent()) {
            if (log_.empty()) log_.add("no_quiescence", "not quiescent after " + std::to_string(applied_.size()) + " steps");
        } else {
            final_state_check({store_, sink_, probe_, scenario_.decls, writes_claims<Claim>, counts_["faults_connection_lost"] > 0}, log_).run(scenario_.work, delivered_);
        }
        count_outcomes();
    }

    void count_outcomes() {
        for (const auto& c : consumers_) {
            const auto& r = c->report;
            counts_["outcome_processed"] += r.outcomes[static_cast<std::size_t>(outcome::processed)];
            counts_["outcome_buffered"] += r.outcomes[static_cast<std::size_t>(outcome::buffered)];
            counts_["outcome_duplicate"] += r.outcomes[static_cast<std::size_t>(outcome::duplicate)];
            counts_["outcome_failed"] += r.outcomes[static_cast<std::size_t>(outcome::failed)];
            counts_["released"] += r.released;
            counts_["release_failures"] += r.release_failures;
            counts_["connection_errors"] += r.connection_errors;
        }
        for (const auto& m : scenario_.work.messages)
            if (probe_.successes(m.key()) > 1) ++counts_["at_least_once_repeats"];
    }

    // ---- helpers ----

    /// Every open transaction of the task dies, as step_driver::lose_connection documents.
    void kill_connections(memory::step_driver::task_id task) { driver_.lose_connection(task); }

    /// Where the consumer's task is parked ("" without a task).
    std::string_view at(std::size_t consumer) const {
        return tasks_[consumer] ? driver_.position(*tasks_[consumer]) : std::string_view();
    }

    bool processed(const claim_key& key) const {
        return std::ranges::any_of(store_.messages_with_key(key), [](const auto& r) { return r.state == message_state::processed; });
    }

    static std::string failure_text(const std::exception_ptr& failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            return e.what();
        } catch (...) {
            return "unknown exception";
        }
    }

    /// The logical message a step works on: the arriving one, or the one its consumer decides.
    std::optional<claim_key> subject(const step& s) const {
        if (const auto* a = std::get_if<arrive>(&s)) return scenario_.work.messages[scenario_.work.deliveries[a->delivery].message].key();
        return std::visit([&](const auto& k) -> std::optional<claim_key> {
            if constexpr (requires { k.consumer; }) {
                const auto& current = consumers_[k.consumer]->report.current;
                if (tasks_[k.consumer] && current)
                    return claim_key{std::string(current->find_header("message-type").value_or("")),
                                     std::string(current->find_header("idempotence-id").value_or(""))};
            }
            return std::nullopt;
        }, s);
    }

    std::string current_delivery(std::size_t consumer) const {
        const auto& current = consumers_[consumer]->report.current;
        if (!current) return "";
        std::string text = " [" + std::string(current->find_header("message-type").value_or("")) + "/" +
                           std::string(current->find_header("idempotence-id").value_or("")) + " " + current->key;
        if (const auto* call = probe_.running(consumer)) text += ", listener of " + listener_probe::text(call->key);
        return text + "]";
    }

    std::string describe_step(const step& s) const {
        std::string text = describe(s);
        if (const auto* a = std::get_if<arrive>(&s)) {
            const auto& d = scenario_.work.deliveries[a->delivery];
            const auto& m = scenario_.work.messages[d.message];
            return text + " " + m.type + "/" + m.id + " " + m.context + " -> c" + std::to_string(d.consumer);
        }
        std::visit([&](const auto& k) {
            if constexpr (requires { k.consumer; })
                text += " at " + (at(k.consumer).empty() ? std::string("(idle)") : std::string(at(k.consumer))) + current_delivery(k.consumer);
        }, s);
        return text;
    }

    std::string after_step(const step& s) const {
        std::string text;
        std::visit([&](const auto& k) {
            if constexpr (requires { k.consumer; }) {
                if (std::is_same_v<std::decay_t<decltype(k)>, advance>)
                    text = " -> " + (at(k.consumer).empty() ? std::string("done") : std::string(at(k.consumer))) +
                           (blocked_[k.consumer] ? " (blocked)" : "");
            }
        }, s);
        return text;
    }

    const scenario& scenario_;
    run_options options_;
    violation_log log_;
    tally counts_;
    memory::store store_;
    memory::error_sink sink_;
    clocks::manual_clock clock_;
    listener_probe probe_;
    unique_rows_check unique_rows_;
    std::vector<std::unique_ptr<consumer<Claim>>> consumers_;
    std::vector<bool> arrived_;    // by planned delivery
    std::vector<bool> delivered_;  // by logical message: at least one copy arrived
    std::set<std::size_t> resent_;
    std::vector<std::optional<memory::step_driver::task_id>> tasks_;  // by consumer
    std::vector<bool> blocked_;    // by consumer: its last step found it blocked
    std::vector<step> applied_;
    std::vector<std::string> trace_;
    std::vector<std::optional<claim_key>> subjects_;
    memory::step_driver driver_{store_};  // last: destroyed first, its tasks use the members above
};

}  // namespace seqinbox::sim
