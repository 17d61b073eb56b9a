#pragma once
// Round trips and time per store call, for the benchmarks' breakdown runs (bench_postgres,
// bench_mariadb; one thread only): a store decorator counting what each call of the inner store
// cost (its statistics().round_trips and wall time), and the breakdown it prints.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench/bench_support.hpp"
#include "bench/inbox_workers.hpp"
#include "seqinbox/store/concept.hpp"

namespace seqinbox::bench {

inline double seconds_since(clock_type::time_point from) { return elapsed_s(from, clock_type::now()); }

/// What the store calls of one step cost in total.
struct step_cost {
    std::uint64_t round_trips = 0;
    double seconds = 0;  ///< wall time inside the calls: client, network and server
};

/// Forwards to a store (postgresql::store, mariadb::store) and adds what each call cost to the
/// step named after it: "t1_<op>" in the claim transaction, "t2_<op>" in a transaction begun
/// while another is open (a requires_new step).
template <class Inner>
class traced_store {
public:
    class transaction;

    explicit traced_store(Inner& inner) : inner_(&inner) {}

    transaction begin();

    seqinbox::sequence_instance create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                                       seqinbox::timestamp created_at, seqinbox::timestamp retain_until) {
        return counted("create_or_get_instance",
                       [&] { return inner_->create_or_get_instance(sequence, context_id, created_at, retain_until); });
    }
    void forget_instance(seqinbox::instance_id id) { inner_->forget_instance(id); }

    seqinbox::stored_as store_message(const seqinbox::message_record& row) {
        return counted("t2_store_message", [&] { return inner_->store_message(row); });
    }

    seqinbox::stored_as store_message_beside(transaction& claim, const seqinbox::message_record& row);

    const std::map<std::string, step_cost>& steps() const noexcept { return steps_; }

    template <class Call>
    std::invoke_result_t<Call> counted(const std::string& step, Call&& call) {
        struct add_on_exit {
            traced_store& self;
            const std::string& step;
            std::uint64_t round_trips = self.inner_->statistics().round_trips;
            clock_type::time_point started = clock_type::now();
            ~add_on_exit() {
                step_cost& cost = self.steps_[step];
                cost.seconds += seconds_since(started);
                cost.round_trips += self.inner_->statistics().round_trips - round_trips;
            }
        } add{*this, step};
        return call();
    }

private:
    Inner* inner_;
    std::map<std::string, step_cost> steps_;
    int open_ = 0;
};

template <class Inner>
class traced_store<Inner>::transaction {
public:
    seqinbox::claim_result claim(const seqinbox::claim_request& request) {
        return traced("claim", [&] { return inner().claim(request); });
    }
    void delete_claim(const seqinbox::claim_key& key) {
        traced("delete_claim", [&] { inner().delete_claim(key); });
    }
    std::vector<seqinbox::message_record> find_messages(const seqinbox::claim_key& key) {
        return traced("find_messages", [&] { return inner().find_messages(key); });
    }
    seqinbox::instance_lock lock_instance(seqinbox::instance_id instance) {
        return traced("lock_instance", [&] { return inner().lock_instance(instance); });
    }
    std::size_t count_waiting(seqinbox::instance_id instance, std::size_t up_to) {
        return traced("count_waiting", [&] { return inner().count_waiting(instance, up_to); });
    }
    std::optional<std::int64_t> last_released_number(seqinbox::instance_id instance) {
        return traced("last_released_number", [&] { return inner().last_released_number(instance); });
    }
    std::vector<seqinbox::message_record> waiting_numbered(seqinbox::instance_id instance, std::int64_t from, std::size_t limit) {
        return traced("waiting_numbered", [&] { return inner().waiting_numbered(instance, from, limit); });
    }
    void skip_numbers(seqinbox::instance_id instance, std::int64_t through) {
        traced("skip_numbers", [&] { inner().skip_numbers(instance, through); });
    }
    std::vector<seqinbox::message_record> waiting_messages(seqinbox::instance_id instance,
                                                           std::span<const std::string> types) {
        return traced("waiting_messages", [&] { return inner().waiting_messages(instance, types); });
    }
    seqinbox::stored_as store_message(const seqinbox::message_record& row) {
        return traced("store_message", [&] { return inner().store_message(row); });
    }
    void update_message_state(seqinbox::message_id id, seqinbox::message_state state, seqinbox::timestamp now) {
        traced("update_message_state", [&] { inner().update_message_state(id, state, now); });
    }
    void close_instance(seqinbox::instance_id instance, seqinbox::timestamp now) {
        traced("close_instance", [&] { inner().close_instance(instance, now); });
    }
    typename Inner::savepoint_id savepoint() {
        return traced("savepoint", [&] { return inner().savepoint(); });
    }
    void rollback_to(typename Inner::savepoint_id point) {
        traced("rollback_to", [&] { inner().rollback_to(point); });
    }
    void commit() {
        traced("commit", [&] { inner().commit(); });
    }
    void rollback() {
        traced("rollback", [&] { inner().rollback(); });
    }
    bool active() const noexcept { return state_ && state_->inner && state_->inner->active(); }

private:
    friend class traced_store;

    /// The wrapped transaction; its end (a rollback when neither commit() nor rollback() ran)
    /// is counted as "<label>_end".
    struct state {
        traced_store* owner;
        std::string label;
        std::optional<typename Inner::transaction> inner;
        ~state() {
            owner->counted(label + "_end", [this] { inner.reset(); });
            --owner->open_;
        }
    };

    explicit transaction(std::unique_ptr<state> s) : state_(std::move(s)) {}

    typename Inner::transaction& inner() { return *state_->inner; }

    template <class Call>
    std::invoke_result_t<Call> traced(const char* op, Call&& call) {
        return state_->owner->counted(state_->label + "_" + op, std::forward<Call>(call));
    }

    std::unique_ptr<state> state_;
};

template <class Inner>
typename traced_store<Inner>::transaction traced_store<Inner>::begin() {
    const std::string label = open_ > 0 ? "t2" : "t1";
    ++open_;  // the state's destructor takes it back, also when begin() fails
    std::unique_ptr<typename transaction::state> s(new typename transaction::state{this, label, std::nullopt});
    counted(label + "_begin", [&] { s->inner.emplace(inner_->begin()); });
    return transaction(std::move(s));
}

template <class Inner>
seqinbox::stored_as traced_store<Inner>::store_message_beside(transaction& claim, const seqinbox::message_record& row) {
    return counted("t2_store_message", [&] { return inner_->store_message_beside(claim.inner(), row); });
}

/// Runs `contexts` contexts on one thread through a traced store and prints, per delivery and
/// per store call, the round trips (rt_<step>) and the microseconds spent in it (us_<step>), then
/// the time spent outside the store (engine, listener, pool waits excluded: one thread).
template <class Store>
void print_breakdown(Store& store, std::size_t contexts, tally& total) {
    static_assert(seqinbox::store_policy<traced_store<Store>>);
    traced_store<Store> traced(store);
    worker<traced_store<Store>> one(traced, "trace");
    const auto started = clock_type::now();
    for (std::size_t i = 0; i < contexts; ++i) one.deliver_next_context();
    const double elapsed = seconds_since(started);
    require(one.error_sink_size() == 0, "breakdown: the error sink is not empty");
    total += one.done();
    const auto deliveries = static_cast<double>(one.done().deliveries);
    double inside = 0;
    for (const auto& [step, cost] : traced.steps()) {
        print("rt_" + step, static_cast<double>(cost.round_trips) / deliveries);
        print("us_" + step, cost.seconds * 1e6 / deliveries);
        inside += cost.seconds;
    }
    print("us_outside_store", (elapsed - inside) * 1e6 / deliveries);
    print("us_per_delivery", elapsed * 1e6 / deliveries);
}

}  // namespace seqinbox::bench
