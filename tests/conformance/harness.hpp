#pragma once
// What the conformance suite (behaviour.hpp) builds its cases with, for other tests too: an inbox
// with recording listeners on a backend fixture (harness), listener hooks, and inspection and
// assertion helpers over the committed state.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "conformance/backend.hpp"
#include "support/order_check.hpp"
#include "support/print_record_bytes.hpp"
#include "support/world.hpp"

namespace seqinbox::conformance {

using testing::call_log;
using testing::message;
using strings = std::vector<std::string>;

inline const std::string order_sequence = "OrderSequence";

template <class B, class Claim = claim::insert_first, class Propagation = propagation::not_supported>
using inbox_of = typename B::template inbox_type<Claim, Propagation>;

/// Runs inside every listener before the call is recorded; throwing makes the listener fail.
template <class Inbox>
using hook = std::function<void(const message&, const typename Inbox::context&)>;

template <class Inbox, class B>
std::unique_ptr<Inbox> make_inbox(B& b, declarations<message> decls) {
    return std::make_unique<Inbox>(b.store, b.source, b.error_sink, std::move(decls), typename Inbox::policy_objects{.clock = b.clock});
}

/// Registers a listener for every declared type: it runs `before`, then records the call in `log`
/// (so `log` holds only the calls that completed).
template <class Inbox>
void listen(Inbox& inbox, call_log& log, hook<Inbox> before) {
    for (const auto& seq : inbox.declared().sequences)
        for (const auto& msg : seq.messages)
            inbox.on(msg.qualified_type(), [&log, before](const message& m, const typename Inbox::context& ctx) {
                if (before) before(m, ctx);
                log.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
            });
}

/// One inbox with recording listeners on a fixture.
template <class B, class Claim = claim::insert_first, class Propagation = propagation::not_supported>
struct harness {
    using inbox_type = inbox_of<B, Claim, Propagation>;

    call_log log;
    std::unique_ptr<inbox_type> inbox;

    explicit harness(B& b, hook<inbox_type> before = {}, declarations<message> decls = testing::order_declarations())
        : inbox(make_inbox<inbox_type>(b, std::move(decls))) {
        listen(*inbox, log, std::move(before));
    }

    delivery_result deliver(const envelope& record) { return inbox->deliver(record); }
    delivery_result deliver(const std::string& type, const std::string& id, const std::string& context_id,
                            std::string value = {}) {
        return inbox->deliver(testing::record(type, id, context_id, std::move(value)));
    }
};

// ---- listener hooks ----

/// Throws from the first `times` calls of `type` (only from replayed calls if asked).
class fail_first {
public:
    explicit fail_first(std::string type, int times = 1, bool only_replayed = false)
        : type_(std::move(type)), times_(times), only_replayed_(only_replayed) {}

    template <class Context>
    void operator()(const message&, const Context& ctx) const {
        if (ctx.qualified_type != type_ || (only_replayed_ && !ctx.replayed)) return;
        if ((*failures_)++ < times_) throw std::runtime_error("boom: " + ctx.qualified_type + "/" + ctx.idempotence_id);
    }

private:
    std::string type_;
    int times_;
    bool only_replayed_;
    std::shared_ptr<int> failures_ = std::make_shared<int>(0);
};

template <class... Hooks>
auto chain(Hooks... hooks) {
    return [=](const message& m, const auto& ctx) { (hooks(m, ctx), ...); };
}

/// What business_writer saw: the database transaction of every call ("Type/id" -> id, 0 when
/// the listener got no transaction) and writes visible outside before the listener returned.
struct business_trace {
    std::map<std::string, std::uint64_t> transaction_of;
    strings visible_too_early;
};

/// Writes the business row "Type/id" = context id through ctx.transaction, if there is one.
template <class B>
auto business_writer(B& b, business_trace& trace) {
    return [&b, &trace](const message&, const auto& ctx) {
        const std::string name = ctx.qualified_type + "/" + ctx.idempotence_id;
        if (ctx.transaction == nullptr) {
            trace.transaction_of[name] = 0;
            return;
        }
        trace.transaction_of[name] = b.transaction_id(*ctx.transaction);
        b.business_put(*ctx.transaction, name, ctx.context_id);
        if (b.business_get(name)) trace.visible_too_early.push_back(name);
    };
}

// ---- inspection and assertions ----

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline std::string join(const strings& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
    return "[" + text + "]";
}

/// "Type/id" of every completed listener call in order, " (replayed)" for released ones.
inline strings calls_of(const call_log& log) {
    strings names;
    for (const auto& c : log.calls()) names.push_back(c.type + "/" + c.idempotence_id + (c.replayed ? " (replayed)" : ""));
    return names;
}

inline void expect_calls(const call_log& log, const strings& expected) {
    BOOST_TEST(join(calls_of(log)) == join(expected));
}

inline void expect_outcome(const delivery_result& result, outcome expected) {
    BOOST_TEST(to_string(result.outcome) == to_string(expected), result.qualified_type << "/" << result.idempotence_id);
}

/// The states of every stored row with this claim key, oldest first.
template <class B>
strings states_of(B& b, const std::string& type, const std::string& id) {
    strings states;
    for (const auto& row : b.messages_with_key({type, id})) states.emplace_back(to_string(row.state));
    return states;
}

template <class B>
void expect_rows(B& b, const std::string& type, const std::string& id, const strings& states) {
    BOOST_TEST(join(states_of(b, type, id)) == join(states), type << "/" << id);
}

template <class B>
message_id row_id(B& b, const std::string& type, const std::string& id) {
    const auto rows = b.messages_with_key({type, id});
    BOOST_TEST_REQUIRE(rows.size() == 1u, type << "/" << id);
    return rows.front().id;
}

template <class B>
std::string instance_state_of(B& b, const std::string& context_id, const std::string& sequence = order_sequence) {
    const auto instance = b.find_instance(sequence, context_id);
    return instance ? std::string(to_string(instance->state)) : "absent";
}

template <class B>
message_id message_id_of(B& b, const std::string& type, const std::string& id) {
    const auto rows = b.messages_with_key({type, id});
    BOOST_TEST_REQUIRE(!rows.empty(), type << "/" << id);
    return rows.front().id;
}

template <class B>
instance_id instance_id_of(B& b, const std::string& context_id) {
    const auto instance = b.find_instance(order_sequence, context_id);
    BOOST_TEST_REQUIRE(instance.has_value(), context_id);
    return instance->id;
}

/// The requests pending on the messages of `context_id`'s instance: "idempotence-id ACTION".
template <class B>
strings pending_message_requests(B& b, const std::string& context_id) {
    const auto view = b.store.view_instance(order_sequence, context_id);
    BOOST_TEST_REQUIRE(view.has_value(), context_id);
    strings pending;
    for (const auto& request : view->actions.on_messages)
        for (const auto& row : view->messages)
            if (row.id == request.message) pending.push_back(row.idempotence_id + " " + std::string(to_string(request.action)));
    return pending;
}

/// Buffers OrderValidated v1, OrderPrepared p1 and OrderShipped s1 of o1 (OrderCreated missing).
template <class Harness>
void buffer_three(Harness& h) {
    for (const auto& [type, id] : {std::pair{"OrderValidated", "v1"}, {"OrderPrepared", "p1"}, {"OrderShipped", "s1"}})
        expect_outcome(h.deliver(type, id, "o1"), outcome::buffered);
}

/// Delivers every type of the order sequence but OrderCreated for `context_id`, in order.
template <class Harness>
void complete_order_after_created(Harness& h, const std::string& context_id) {
    for (const char* type : {"OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
        expect_outcome(h.deliver(type, std::string(type) + "@" + context_id, context_id), outcome::processed);
}

/// Delivers every type of the order sequence for `context_id`, in order: the instance closes.
template <class Harness>
void complete_order(Harness& h, const std::string& context_id) {
    expect_outcome(h.deliver("OrderCreated", "OrderCreated@" + context_id, context_id), outcome::processed);
    complete_order_after_created(h, context_id);
}

template <class B>
using housekeeper_of = basic_housekeeper<typename B::store_type, memory::error_sink, clock::manual_clock>;

/// An error sink whose `failing_publication`-th publication (from 1) throws; it keeps the others.
class nth_publication_fails {
public:
    explicit nth_publication_fails(std::size_t failing_publication) : failing_(failing_publication) {}
    void publish(const failed_delivery& failure) {
        if (++publications_ == failing_) throw std::runtime_error("dead-letter topic unavailable");
        published_.push_back(failure);
    }
    std::size_t size() const { return published_.size(); }

private:
    std::size_t failing_;
    std::size_t publications_ = 0;
    std::vector<failed_delivery> published_;
};

/// A manual clock that moves by a second each time it is read: a housekeeping run then takes
/// two seconds per batch, whatever the machine.
struct ticking_clock {
    clock::manual_clock shared;
    timestamp now() {
        shared.advance(std::chrono::seconds(1));
        return shared.now();
    }
};

/// The run of `job` in `report` (a job that ran).
inline const housekeeping_job_run& job_run(const housekeeping_report& report, std::string_view job) {
    const auto it = std::ranges::find(report.jobs, job, &housekeeping_job_run::job);
    BOOST_TEST_REQUIRE((it != report.jobs.end()), "job " << job << " did not run");
    return *it;
}

/// Options that remove an expired instance in the run that marks it, without pauses.
inline housekeeping_options removing_at_once() {
    housekeeping_options options;
    options.removal_delay = std::chrono::seconds(0);
    options.work_share = 1;
    return options;
}

template <class B>
std::string business(B& b, const std::string& name) {
    return b.business_get(name).value_or("<none>");
}

/// The only error-sink record of this idempotence id.
template <class B>
failed_delivery sink_record(B& b, const std::string& id) {
    strings reasons;
    std::optional<failed_delivery> found;
    for (const auto& r : b.error_sink.records())
        if (r.idempotence_id == id) {
            reasons.push_back(r.reason);
            found = r;
        }
    BOOST_TEST_REQUIRE(reasons.size() == 1u, "error sink records of '" << id << "': " << join(reasons));
    return *found;
}

/// Checks the error-sink record of a listener failure.
template <class B>
void expect_listener_failure_in_sink(B& b, const std::string& type, const std::string& id, const std::string& context_id) {
    const auto failure = sink_record(b, id);
    BOOST_TEST(failure.qualified_type == type);
    BOOST_TEST(failure.context_id == context_id);
    BOOST_TEST(contains(failure.reason, "boom: " + type + "/" + id), "reason: " << failure.reason);
    BOOST_TEST(failure.original.find_header("idempotence-id").value_or("") == id);
}

template <class B>
void expect_nothing_stored(B& b) {
    BOOST_TEST(b.messages().size() == 0u);
    BOOST_TEST(b.claim_count() == 0u);
    BOOST_TEST(b.instances().size() == 0u);
}

template <class B>
strings acknowledged_ids(B& b) {
    strings ids;
    for (const auto& e : b.source.acknowledged()) ids.emplace_back(e.find_header("idempotence-id").value_or("?"));
    return ids;
}

/// Delivers every "Type/id" of `type_ids` in context `context_id` and expects `expected` for each.
template <class Harness>
void expect_each(Harness& h, outcome expected, const std::string& context_id, const strings& type_ids) {
    for (const auto& name : type_ids) {
        const auto slash = name.find('/');
        expect_outcome(h.deliver(name.substr(0, slash), name.substr(slash + 1), context_id), expected);
    }
}

/// Delivers "Type/id" in `context_id`: processed, releasing `released` buffered messages.
template <class Harness>
void expect_releasing(Harness& h, const std::string& context_id, const std::string& type_id, std::size_t released) {
    const auto slash = type_id.find('/');
    const auto result = h.deliver(type_id.substr(0, slash), type_id.substr(slash + 1), context_id);
    expect_outcome(result, outcome::processed);
    BOOST_TEST(result.released == released, type_id);
    BOOST_TEST(result.release_failures == 0u, type_id);
}

/// A row of the order sequence's instance for `context_id` (created when missing).
template <class B>
message_record order_row(B& b, const std::string& context_id, const std::string& type, const std::string& id, message_state state) {
    const timestamp now = b.clock.now();
    message_record row;
    row.instance = b.store.create_or_get_instance(order_sequence, context_id, now, now + std::chrono::hours(24)).id;
    row.type = type;
    row.idempotence_id = id;
    row.state = state;
    row.created_at = now;
    row.state_changed_at = now;
    return row;
}

/// Stores `copies` rows with one key and no claim, as a database from before the claim table.
template <class B>
void insert_historical_rows(B& b, const std::string& context_id, const std::string& type, const std::string& id,
                            message_state state, int copies) {
    const message_record row = order_row(b, context_id, type, id, state);
    auto tx = b.store.begin();
    for (int i = 0; i < copies; ++i) tx.insert_message(row);
    tx.commit();
}

/// Validated before Created (buffered, then released by Created), then Prepared directly.
template <class Harness>
void buffered_then_direct(Harness& h) {
    expect_outcome(h.deliver("OrderValidated", "v1", "o1"), outcome::buffered);
    expect_releasing(h, "o1", "OrderCreated/c1", 1);
    expect_outcome(h.deliver("OrderPrepared", "p1", "o1"), outcome::processed);
    expect_calls(h.log, {"OrderCreated/c1", "OrderValidated/v1 (replayed)", "OrderPrepared/p1"});
}

/// The order sequence plus CheckSequence: Check.X, then Check.Y, subtype resolved from the value.
inline declarations<message> with_check_subtypes() {
    auto decls = testing::order_declarations();
    sequence_declaration<message> checks;
    checks.name = "CheckSequence";
    checks.retention = std::chrono::hours(1);
    checks.messages = {testing::declare("Check", {}, "X"), testing::declare("Check", after("Check.X"), "Y")};
    decls.sequences.push_back(std::move(checks));
    decls.resolvers["Check"] = {[](const message& value, const envelope&) { return value; }, {"X", "Y"}};
    return decls;
}

/// Counts listeners running per context; any second one running at once is an overlap.
class exclusivity_probe {
public:
    explicit exclusivity_probe(const strings& contexts) {
        for (const auto& c : contexts) in_flight_.try_emplace(c, 0);
    }

    void visit(const std::string& context_id) {
        auto& running = in_flight_.at(context_id);
        if (running.fetch_add(1) != 0) overlaps_.fetch_add(1);
        const int now_running = everywhere_.fetch_add(1) + 1;
        int seen = most_.load();
        while (now_running > seen && !most_.compare_exchange_weak(seen, now_running)) {}
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        everywhere_.fetch_sub(1);
        running.fetch_sub(1);
    }

    int overlaps() const { return overlaps_.load(); }
    int most_in_parallel() const { return most_.load(); }

private:
    std::map<std::string, std::atomic<int>> in_flight_;
    std::atomic<int> overlaps_{0};
    std::atomic<int> everywhere_{0};
    std::atomic<int> most_{0};
};

}  // namespace seqinbox::conformance

