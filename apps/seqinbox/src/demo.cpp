// `seqinbox demo`: see demo.hpp. Three inbox objects ("service instances") share one in-memory
// store and one error sink; a step_driver runs one delivery loop per instance on its own thread
// and a seeded scheduler picks which one performs its next store operation. Only one thread runs
// at a time, so claims really block and losers really skip, yet a seed always gives the same run.
#include "demo.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/decision.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/example.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/logger/concept.hpp"
#include "seqinbox/logger/decision_text.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/inbox.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/step_driver.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/outcome.hpp"

namespace seqinbox::cli {

namespace {

using message = std::string;  // the header decoder's message: the record value as text

constexpr std::string_view sequence_name = "OrderSequence";
constexpr std::array<std::string_view, 3> service_names{"svc-a", "svc-b", "svc-c"};
constexpr std::size_t max_orders = 1000;
constexpr unsigned duplicate_percent = 30;

// ---------------------------------------------------------------------------------------------
// Seeded randomness that gives the same sequence with every standard library (splitmix64;
// std::uniform_int_distribution and std::shuffle are implementation-defined).
class random {
public:
    explicit random(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// In [0, n); n > 0. The modulo bias is negligible for the small n used here.
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

    template <class T>
    void shuffle(std::vector<T>& items) {
        for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
    }

private:
    std::uint64_t state_;
};

// ---------------------------------------------------------------------------------------------
// The scenario: logical messages, their deliveries, and the one injected listener failure.

struct logical_message {
    std::string type;
    std::string id;     ///< idempotence id
    std::string order;  ///< context id
};

struct planned_delivery {
    std::size_t message;  ///< index into the logical messages
    std::size_t service;
    std::size_t slot;     ///< position in the overall arrival order
    bool duplicate;
};

struct scenario {
    std::vector<logical_message> messages;
    std::vector<std::string> orders;
    std::vector<planned_delivery> deliveries;  ///< by arrival
    std::size_t duplicates = 0;
    std::size_t failing = 0;  ///< the message whose listener fails the first time it sees it
};

/// `text` left-aligned in a column of `width` (at least one space follows). Not <iomanip>: see
/// the report on seqinbox/declare/problems.hpp, whose unqualified quoted() std::quoted hijacks.
std::string column(std::string_view text, std::size_t width) {
    std::string cell(text);
    cell.append(text.size() < width ? width - text.size() : 1, ' ');
    return cell;
}

std::string padded(std::string_view prefix, std::size_t n, std::size_t width) {
    std::string digits = std::to_string(n);
    return std::string(prefix) + std::string(width > digits.size() ? width - digits.size() : 0, '0') + digits;
}

scenario plan(std::size_t orders, random& rng) {
    scenario s;
    std::vector<std::vector<std::string>> types_of(orders);
    std::size_t total = 0;
    for (std::size_t k = 1; k <= orders; ++k) {
        // Orders alternate Prepared / Expedited; order 3 has both; later multiples of 3 draw one.
        auto& types = types_of[k - 1];
        types = {"OrderCreated", "OrderValidated"};
        if (k % 3 == 1) types.emplace_back("OrderPrepared");
        if (k % 3 == 2) types.emplace_back("OrderExpedited");
        if (k == 3) types.insert(types.end(), {"OrderPrepared", "OrderExpedited"});
        if (k % 3 == 0 && k != 3) types.emplace_back(rng.below(2) == 0 ? "OrderPrepared" : "OrderExpedited");
        types.emplace_back("OrderShipped");
        total += types.size();
    }
    const std::size_t id_width = std::max<std::size_t>(2, std::to_string(total).size());
    for (std::size_t k = 1; k <= orders; ++k) {
        s.orders.push_back("order-" + std::to_string(k));
        for (auto& type : types_of[k - 1]) s.messages.push_back({type, padded("m", s.messages.size() + 1, id_width), s.orders.back()});
    }

    // Arrival: every logical message once, shuffled, each to a random service instance.
    std::vector<std::size_t> arrival(s.messages.size());
    for (std::size_t i = 0; i < arrival.size(); ++i) arrival[i] = i;
    rng.shuffle(arrival);
    constexpr std::size_t slot_gap = 4;  // room for duplicates to land between two originals
    for (std::size_t pos = 0; pos < arrival.size(); ++pos)
        s.deliveries.push_back({arrival[pos], rng.below(service_names.size()), pos * slot_gap, false});

    // The failing message gets no duplicate, so that its re-send from the error sink is the retry.
    s.failing = rng.below(s.messages.size());

    // Duplicates (~30 %), as a redelivery after a rebalance: another instance, shortly after the
    // original, so that both are often in flight at once.
    std::vector<planned_delivery> candidates;
    for (const auto& d : s.deliveries)
        if (d.message != s.failing) candidates.push_back(d);
    rng.shuffle(candidates);
    s.duplicates = std::min(candidates.size(), (s.messages.size() * duplicate_percent + 50) / 100);
    for (std::size_t i = 0; i < s.duplicates; ++i) {
        const auto& original = candidates[i];
        std::size_t other = (original.service + 1 + rng.below(service_names.size() - 1)) % service_names.size();
        s.deliveries.push_back({original.message, other, original.slot + 1 + rng.below(2 * slot_gap), true});
    }
    std::ranges::stable_sort(s.deliveries, {}, &planned_delivery::slot);
    return s;
}

envelope record_for(const logical_message& m, std::size_t service) {
    envelope e;
    e.key = m.order;
    e.value = m.type + ":" + m.id;
    e.headers = {{"message-type", m.type}, {"idempotence-id", m.id}};
    e.topic = "orders";
    e.partition = static_cast<std::int32_t>(service);
    return e;
}

// ---------------------------------------------------------------------------------------------
// The trace: one aligned line per decision.

class trace {
public:
    trace(std::ostream& out, bool enabled, const scenario& s, const declarations<message>& decls) : out_(&out), enabled_(enabled) {
        for (const auto& m : s.messages) {
            order_of_.emplace(m.id, m.order);
            id_width_ = std::max(id_width_, m.id.size());
            order_width_ = std::max(order_width_, m.order.size());
        }
        for (const auto& seq : decls.sequences)
            for (const auto& m : seq.messages) release_.emplace(m.qualified_type(), m.release);
    }

    bool enabled() const noexcept { return enabled_; }

    void line(std::string_view who, std::string_view verb, std::string_view type, std::string_view id,
              std::string_view order, std::string_view detail = {}) {
        if (!enabled_) return;
        std::lock_guard lock(mutex_);
        std::string text = column(who, 7) + column(verb, 10) + column(type, 16) + column(id, id_width_ + 2) +
                           column(order, order_width_ + 2);
        text += detail;
        while (!text.empty() && text.back() == ' ') text.pop_back();
        *out_ << text << '\n';
    }

    void note(std::string_view text) {
        if (!enabled_) return;
        std::lock_guard lock(mutex_);
        *out_ << text << '\n';
    }

    /// One line per decision of the engine, from its fields; a decision the trace has no verb
    /// for, and the engine's other messages, are shown as the engine logs them.
    void decided(std::string_view who, const decision& e) {
        const std::string type = detail::loggable(e.qualified_type), id = detail::loggable(e.idempotence_id);
        const std::string order = order_of(e);
        const std::string reason = detail::loggable(e.reason);
        switch (e.kind) {
        case decision_kind::processed: return line(who, "delivered", type, id, order);
        case decision_kind::buffered: return line(who, "buffered", type, id, order, until(e.qualified_type));
        case decision_kind::released: return line(who, "released", type, id, order);
        case decision_kind::duplicate: return line(who, "skipped", type, id, order, "duplicate, " + reason);
        case decision_kind::failed: return line(who, "failed", type, id, order, reason + " -> error sink");
        case decision_kind::release_failed: return line(who, "failed", type, id, order, "on release: " + reason + " -> error sink");
        case decision_kind::rejected: return line(who, "rejected", type, id, order, reason);
        case decision_kind::not_sequenced: return line(who, "direct", type, id, order, "-> " + std::string(to_string(e.result)));
        case decision_kind::closed:
            return line(who, "closed", "", "", order.empty() ? "instance " + std::to_string(e.instance) : order,
                        "every declared type processed: instance CLOSED");
        default: return logged(who, logger::text_of(e));
        }
    }

    void logged(std::string_view who, std::string_view text) { line(who, "log", text, "", ""); }

private:
    /// The decision's context id, or the order its message belongs to when it has none.
    std::string order_of(const decision& e) const {
        if (!e.context_id.empty()) return detail::loggable(e.context_id);
        const auto it = order_of_.find(e.idempotence_id);
        return it != order_of_.end() ? it->second : std::string();
    }

    std::string until(std::string_view type) const {
        const auto it = release_.find(type);
        return it != release_.end() ? "until " + describe(it->second, condition_notation::words) : std::string();
    }

    std::ostream* out_;
    bool enabled_;
    std::map<std::string, std::string, std::less<>> order_of_;  // idempotence id -> order
    std::map<std::string, condition, std::less<>> release_;     // qualified type -> condition
    std::size_t id_width_ = 2;
    std::size_t order_width_ = 5;
    std::mutex mutex_;
};

/// The logger policy of the demo's inboxes: hands the engine's decisions and messages to the
/// trace, tagged with the service instance. Copies share the trace.
class trace_logger {
public:
    trace_logger(trace& t, std::string_view who) : trace_(&t), who_(who) {}
    bool enabled(log_level level) const { return trace_->enabled() && level >= log_level::info; }
    void log(log_level, std::string_view text) { trace_->logged(who_, text); }
    void decided(const decision& e) { trace_->decided(who_, e); }

private:
    trace* trace_;
    std::string_view who_;
};
static_assert(decision_logger<trace_logger>);

struct demo_policies : default_policies {
    using clock = ::seqinbox::clock::manual_clock;
    using logger = trace_logger;
};
using demo_inbox = memory::basic_inbox<demo_policies>;

// ---------------------------------------------------------------------------------------------
// What the listeners saw, and the injected failure.

struct listener_call {
    std::size_t service;
    std::string type, id, order;
    bool replayed;
};

class listeners {
public:
    listeners(trace& t, const logical_message& failing) : trace_(&t), failing_(failing) {}

    /// The listener of every type on every instance: fails once on the chosen message, else records.
    void handle(std::size_t service, const demo_inbox::context& ctx) {
        std::lock_guard lock(mutex_);
        if (!failed_ && ctx.qualified_type == failing_.type && ctx.idempotence_id == failing_.id) {
            failed_ = true;
            ++injected_;
            trace_->line(service_names[service], "throws", ctx.qualified_type, ctx.idempotence_id, ctx.context_id,
                         std::string("injected failure, first time this listener sees it") + (ctx.replayed ? " (on release)" : ""));
            throw std::runtime_error("injected failure");
        }
        calls_.push_back({service, ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
    }

    std::vector<listener_call> calls() const {
        std::lock_guard lock(mutex_);
        return calls_;
    }
    std::size_t injected() const {
        std::lock_guard lock(mutex_);
        return injected_;
    }

private:
    trace* trace_;
    logical_message failing_;
    mutable std::mutex mutex_;
    bool failed_ = false;
    std::size_t injected_ = 0;
    std::vector<listener_call> calls_;
};

// ---------------------------------------------------------------------------------------------
// Service instances and the seeded scheduler.

struct service {
    std::size_t index = 0;
    memory::source source;
    std::unique_ptr<demo_inbox> inbox;
    std::vector<delivery_result> results;  // written by its task only
};

/// The delivery a task is deciding; written by the task, read by the controller between steps
/// (the step driver's hand-over orders the accesses).
struct in_flight {
    std::string type, id, order;
};

struct schedule_stats {
    std::size_t steps = 0;
    std::size_t claim_waits = 0;
    std::size_t lock_waits = 0;
    std::vector<std::string> failures;  // tasks that ended with an exception, or a deadlock
};

class scheduler {
public:
    scheduler(memory::store& store, random& rng, trace& t) : driver_(store), rng_(&rng), trace_(&t) {}

    /// Runs one delivery loop per instance with pending deliveries until every source is empty.
    void run(std::vector<std::unique_ptr<service>>& services, schedule_stats& stats) {
        std::vector<task> live;
        for (auto& svc : services) {
            if (svc->source.pending() == 0) continue;
            auto current = std::make_unique<in_flight>();
            auto body = [s = svc.get(), cur = current.get()] {
                while (auto record = s->source.poll()) {
                    *cur = {std::string(record->find_header("message-type").value_or("")),
                            std::string(record->find_header("idempotence-id").value_or("")), record->key.value_or("")};
                    s->results.push_back(s->inbox->deliver(*record));
                    s->source.acknowledge(*record);
                }
                *cur = {};
            };
            live.push_back({svc->index, 0, std::move(current), false});
            live.back().id = driver_.spawn(std::string(service_names[svc->index]), body);
        }
        std::size_t stalled = 0;  // consecutive steps that found the chosen task still blocked
        while (true) {
            std::erase_if(live, [&](task& t) { return finished(t, stats); });
            if (live.empty()) return;
            task& t = live[rng_->below(live.size())];
            const auto status = driver_.step(t.id);
            ++stats.steps;
            if (status != memory::task_status::blocked) {
                t.blocked = false;
                stalled = 0;
                continue;
            }
            if (!t.blocked) {
                t.blocked = true;
                waits(t, live, stats);
            }
            if (++stalled > 200 * live.size()) {
                std::string who;
                for (auto& other : live) who += " " + std::string(service_names[other.service]) + " at " + std::string(driver_.position(other.id));
                stats.failures.push_back("deadlock: every instance is blocked:" + who);
                for (auto& other : live) driver_.lose_connection(other.id);
                stalled = 0;
            }
        }
    }

private:
    struct task {
        std::size_t service;
        memory::step_driver::task_id id;
        std::unique_ptr<in_flight> current;
        bool blocked;
    };

    bool finished(const task& t, schedule_stats& stats) {
        const auto status = driver_.status(t.id);
        if (status == memory::task_status::finished) return true;
        if (status != memory::task_status::failed) return false;
        std::string what = "unknown exception";
        try {
            std::rethrow_exception(driver_.failure(t.id));
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        stats.failures.push_back(std::string(service_names[t.service]) + " stopped while deciding " + t.current->type + " " +
                                 t.current->id + ": " + what);
        return true;
    }

    /// Reports that `t` blocked, naming the instance it waits for when that is unambiguous: the
    /// only other running (not blocked) task on the same message (claim) or order (row lock).
    void waits(const task& t, const std::vector<task>& live, schedule_stats& stats) {
        const std::string_view label = driver_.position(t.id);
        const bool on_claim = label == "claim.insert" || label == "claim.delete";
        (on_claim ? stats.claim_waits : stats.lock_waits)++;
        if (!trace_->enabled()) return;
        std::vector<std::string_view> holders;
        for (const auto& other : live) {
            if (&other == &t || other.blocked) continue;
            const bool same = on_claim ? other.current->type == t.current->type && other.current->id == t.current->id
                                       : other.current->order == t.current->order;
            if (same) holders.push_back(service_names[other.service]);
        }
        const std::string by = holders.size() == 1 ? std::string(holders.front()) : std::string("another instance");
        std::string detail;
        if (on_claim)
            detail = "claim held by " + by + " (same message in flight)";
        else if (label == "instance.lock")
            detail = "order locked by " + by;
        else
            detail = "at " + std::string(label) + ", locked by " + by;
        trace_->line(service_names[t.service], "waits", t.current->type, t.current->id, t.current->order, detail);
    }

    memory::step_driver driver_;
    random* rng_;
    trace* trace_;
};

// ---------------------------------------------------------------------------------------------
// Verification.

struct check {
    bool ok;
    std::string text;
};

check exactly_once(const scenario& s, const std::vector<listener_call>& calls) {
    std::map<std::pair<std::string, std::string>, std::size_t> count;
    for (const auto& c : calls) ++count[{c.type, c.id}];
    std::vector<std::string> wrong;
    for (const auto& m : s.messages) {
        auto it = count.find({m.type, m.id});
        const std::size_t n = it == count.end() ? 0 : it->second;
        if (n != 1) wrong.push_back(m.type + " " + m.id + " (" + m.order + ") succeeded " + std::to_string(n) + " times");
        if (it != count.end()) count.erase(it);
    }
    for (const auto& [key, n] : count) wrong.push_back(key.first + " " + key.second + " was never sent but ran " + std::to_string(n) + " times");
    if (wrong.empty())
        return {true, "every logical message's listener succeeded exactly once (" + std::to_string(s.messages.size()) + " messages)"};
    std::string text = "listeners did not succeed exactly once:";
    for (const auto& w : wrong) text += "\n        " + w;
    return {false, text};
}

/// Each listener call must find its type's declared release condition satisfied by the types
/// whose listeners already succeeded in the same order.
check declared_order(const scenario& s, const std::vector<listener_call>& calls, const declarations<message>& decls) {
    std::map<std::string, const condition*, std::less<>> release;
    for (const auto& seq : decls.sequences)
        for (const auto& m : seq.messages) release.emplace(m.qualified_type(), &m.release);
    std::vector<std::string> wrong;
    for (const auto& order : s.orders) {
        std::set<std::string, std::less<>> done;
        for (const auto& c : calls) {
            if (c.order != order) continue;
            auto it = release.find(c.type);
            if (it == release.end()) {
                wrong.push_back(order + ": " + c.type + " is not declared");
            } else if (!it->second->satisfied([&](const std::string& t) { return done.contains(t); })) {
                std::string before;
                for (const auto& t : done) before += (before.empty() ? "" : ", ") + t;
                wrong.push_back(order + ": " + c.type + " " + c.id + " ran before '" + describe(*it->second, condition_notation::words) +
                                "' held (already processed: " + (before.empty() ? "none" : before) + ")");
            }
            done.insert(c.type);
        }
    }
    if (wrong.empty())
        return {true, "every order's listeners ran in an order its declared release conditions allow (" +
                          std::to_string(s.orders.size()) + " orders)"};
    std::string text = "listeners ran out of the declared order:";
    for (const auto& w : wrong) text += "\n        " + w;
    return {false, text};
}

check store_state(const scenario& s, const memory::store& store) {
    const auto rows = store.messages();
    std::size_t processed = 0;
    std::string other;
    for (const auto& row : rows) {
        if (row.state == message_state::processed)
            ++processed;
        else
            other += "\n        " + row.type + " " + row.idempotence_id + " is " + std::string(to_string(row.state));
    }
    const std::size_t n = s.messages.size();
    const bool ok = rows.size() == n && processed == n && store.claim_count() == n && store.open_transaction_count() == 0;
    if (ok) return {true, "store: " + std::to_string(n) + " sequenced messages, all PROCESSED, one claim each, no open transaction"};
    return {false, "store: " + std::to_string(rows.size()) + " sequenced messages, " + std::to_string(processed) + " PROCESSED, " +
                       std::to_string(store.claim_count()) + " claims, " + std::to_string(store.open_transaction_count()) +
                       " open transactions; expected " + std::to_string(n) + ", all PROCESSED, " + std::to_string(n) +
                       " claims, none open" + other};
}

// ---------------------------------------------------------------------------------------------

struct tally {
    std::size_t delivered = 0, buffered = 0, released = 0, skipped = 0, failed = 0, other = 0;
};

tally count(const std::vector<std::unique_ptr<service>>& services) {
    tally t;
    for (const auto& svc : services)
        for (const auto& r : svc->results) {
            t.released += r.released;
            t.failed += r.release_failures;
            switch (r.outcome) {
            case outcome::processed: ++t.delivered; break;
            case outcome::buffered: ++t.buffered; break;
            case outcome::duplicate: ++t.skipped; break;
            case outcome::failed: ++t.failed; break;
            case outcome::not_sequenced:
            case outcome::rejected: ++t.other; break;
            }
        }
    return t;
}

void print_summary(std::ostream& out, const demo_options& options, const scenario& s, const std::vector<listener_call>& calls,
                   const memory::store& store) {
    std::size_t width = 5;
    for (const auto& order : s.orders) width = std::max(width, order.size());
    out << "summary (seed " << options.seed << ")\n";
    out << "  " << column("order", width + 2) << column("state", 8) << "listeners, in the order they ran\n";
    for (const auto& order : s.orders) {
        std::string ran;
        for (const auto& c : calls)
            if (c.order == order) ran += (ran.empty() ? "" : " > ") + c.type;
        auto instance = store.find_instance(std::string(sequence_name), order);
        out << "  " << column(order, width + 2) << column(instance ? to_string(instance->state) : "-", 8) << ran << '\n';
    }
    out << "  (an order closes once every declared type was processed; one with only Prepared or only\n"
           "   Expedited stays OPEN until housekeeping removes it after its retention period)\n";
}

}  // namespace

bool run_demo(const demo_options& options, std::ostream& out) {
    if (options.orders == 0 || options.orders > max_orders) throw std::invalid_argument("orders must be 1 to 1000");
    random rng(options.seed);
    const declarations<message> decls = example::order_declarations<message>();
    const scenario s = plan(options.orders, rng);
    const logical_message& failing = s.messages[s.failing];

    memory::store store;
    memory::error_sink sink;
    clock::manual_clock clock;
    trace tr(out, !options.quiet, s, decls);
    listeners heard(tr, failing);

    std::vector<std::unique_ptr<service>> services;
    for (std::size_t i = 0; i < service_names.size(); ++i) {
        auto svc = std::make_unique<service>();
        svc->index = i;
        svc->inbox = std::make_unique<demo_inbox>(store, svc->source, sink, decls,
                                                  demo_inbox::policy_objects{.clock = clock, .logger = trace_logger(tr, service_names[i])});
        for (const auto& seq : decls.sequences)
            for (const auto& m : seq.messages)
                svc->inbox->on(m.qualified_type(), [&heard, i](const message&, const demo_inbox::context& ctx) { heard.handle(i, ctx); });
        services.push_back(std::move(svc));
    }
    for (const auto& d : s.deliveries) services[d.service]->source.push(record_for(s.messages[d.message], d.service));

    tr.note("seqinbox demo, seed " + std::to_string(options.seed) + ": " + std::to_string(s.orders.size()) + " orders, " +
            std::to_string(s.messages.size()) + " logical messages + " + std::to_string(s.duplicates) +
            " duplicates, delivered shuffled through " + std::to_string(service_names.size()) +
            " service instances sharing one store");
    tr.note("declared: OrderCreated; OrderValidated, OrderPrepared, OrderExpedited after OrderCreated;");
    tr.note("          OrderShipped after " + describe(decls.sequences.front().messages.back().release, condition_notation::words));
    tr.note("injected: the listener throws the first time it sees " + failing.type + " " + failing.id + " (" + failing.order + ")");
    tr.note("");
    tr.note("delivered: listener ran on delivery    buffered: stored until its condition holds    released: buffered, now run");
    tr.note("skipped: duplicate, listener not run    waits: blocked on a claim or lock another instance holds");
    tr.note("failed: listener threw, sent to the error sink    retried: re-sent from the error sink");
    tr.note("");

    schedule_stats stats;
    scheduler sched(store, rng, tr);
    sched.run(services, stats);

    // Re-send what reached the error sink, as an operator would, through a random instance.
    const auto failures = sink.records();
    for (const auto& f : failures) {
        const std::size_t i = rng.below(service_names.size());
        tr.line(service_names[i], "retried", f.qualified_type, f.idempotence_id, f.context_id, "re-sent from the error sink");
        envelope again = f.original;
        again.offset = -1;  // a new record on the topic
        services[i]->source.push(std::move(again));
    }
    sched.run(services, stats);
    tr.note("");

    const auto calls = heard.calls();
    const tally t = count(services);
    print_summary(out, options, s, calls, store);
    out << "  deliveries: " << s.messages.size() + s.duplicates + failures.size() << " (" << s.messages.size()
        << " logical + " << s.duplicates << " duplicates + " << failures.size() << " retried)\n";
    out << "  decisions:  " << t.delivered << " delivered, " << t.buffered << " buffered, " << t.released << " released, "
        << t.skipped << " skipped as duplicates, " << t.failed << " failed\n";
    out << "  scheduler:  " << stats.steps << " steps over " << service_names.size() << " instances, " << stats.claim_waits
        << " waits on a claim, " << stats.lock_waits << " on an order lock\n";

    std::vector<check> checks;
    checks.push_back(exactly_once(s, calls));
    checks.push_back(declared_order(s, calls, decls));
    checks.push_back({sink.size() == heard.injected(), "error sink holds " + std::to_string(sink.size()) + " record(s) for " +
                                                           std::to_string(heard.injected()) + " injected failure(s)"});
    checks.push_back({t.skipped == s.duplicates && t.other == 0,
                      std::to_string(t.skipped) + " deliveries skipped as duplicates for " + std::to_string(s.duplicates) +
                          " duplicates sent" + (t.other ? ", " + std::to_string(t.other) + " unexpected outcomes" : "")});
    checks.push_back(store_state(s, store));
    std::string failed_tasks;
    for (const auto& f : stats.failures) failed_tasks += "\n        " + f;
    checks.push_back({stats.failures.empty(), "every delivery reached a decision (no instance stopped on an error)" + failed_tasks});

    out << "verification\n";
    bool ok = true;
    for (const auto& c : checks) {
        out << (c.ok ? "  ok    " : "  FAIL  ") << c.text << '\n';
        ok = ok && c.ok;
    }
    if (ok)
        out << "OK: every logical message handled exactly once and in order\n";
    else
        out << "FAILED: see the checks above (seed " << options.seed << ")\n";
    return ok;
}

int demo_command(std::span<const std::string_view> args) {
    demo_options options;
    for (option_reader r(args, "demo"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << "usage: seqinbox demo [--seed N] [--orders N] [--quiet]\n"
                         "\n"
                         "Delivers the messages of an order sequence shuffled, ~30 % duplicated and concurrently\n"
                         "through three in-memory service instances sharing one store, then verifies that every\n"
                         "message was handled exactly once and in its declared order:\n"
                         "  OrderCreated; OrderValidated, OrderPrepared, OrderExpedited after OrderCreated;\n"
                         "  OrderShipped after OrderValidated and (OrderPrepared or OrderExpedited).\n"
                         "A seeded scheduler interleaves the instances one store operation at a time, so claims\n"
                         "really block and duplicates really lose, yet a seed always gives the same run. One\n"
                         "listener fails once; its message goes to the error sink and is re-sent.\n"
                         "\n"
                         "options:\n"
                         "  --seed N     seed of the shuffle, duplicates, failure and scheduler (default 1)\n"
                         "  --orders N   number of orders, 1 to 1000 (default 5)\n"
                         "  --quiet      print only the summary and the verification\n"
                         "  -h, --help   show this help\n"
                         "\n"
                         "exit status: 0 verified, 1 a verification failed, 2 usage error\n";
            return exit_ok;
        }
        if (r.flag("--quiet") || r.flag("-q")) {
            options.quiet = true;
        } else if (auto seed = r.value("--seed")) {
            options.seed = r.number("--seed", *seed, 0, UINT64_MAX);
        } else if (auto orders = r.value("--orders")) {
            options.orders = static_cast<std::size_t>(r.number("--orders", *orders, 1, max_orders));
        } else {
            r.unknown();
        }
    }
    return run_demo(options, std::cout) ? exit_ok : exit_check_failed;
}

}  // namespace seqinbox::cli
