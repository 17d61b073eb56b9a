#pragma once
// The inbox workload of the store benchmarks (bench_postgres, bench_relay, bench_housekeeping,
// bench_mariadb): workers, one inbox each on a shared store, delivering fresh contexts of a 3-type chain one by one or in
// batches of batch_size records (every other context in reverse declared order, every fifth
// message twice), and the measured run of several of them on threads of their own.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "support/world.hpp"

namespace seqinbox::bench {

constexpr std::size_t batch_size = 100;

/// How long a measured run lasts.
struct run_length {
    std::size_t seconds = 3;     ///< per measured run, unless `deliveries` is set
    std::size_t deliveries = 0;  ///< per measured run; 0: run for `seconds`
};

inline const std::string bench_sequence = "BenchSequence";
inline const std::vector<std::string> chain_types = {"BenchCreated", "BenchValidated", "BenchShipped"};

/// chain_types[0] has no condition; chain_types[i] is released after chain_types[i-1].
inline seqinbox::declarations<std::string> chain_declarations() {
    seqinbox::sequence_declaration<std::string> seq;
    seq.name = bench_sequence;
    seq.retention = std::chrono::hours(24);
    for (std::size_t i = 0; i < chain_types.size(); ++i)
        seq.messages.push_back(seqinbox::testing::declare(
            chain_types[i], i == 0 ? seqinbox::condition{} : seqinbox::after(chain_types[i - 1])));
    seqinbox::declarations<std::string> d;
    d.sequences.push_back(std::move(seq));
    return d;
}

/// What a worker did; subtracting two tallies gives what it did in between.
struct tally {
    std::size_t contexts = 0;
    std::size_t deliveries = 0;
    std::size_t not_processed = 0;
    std::size_t listener_calls = 0;
    std::size_t duplicates = 0;  ///< deliveries of a message delivered before (skipped)

    tally& operator+=(const tally& t) {
        duplicates += t.duplicates;
        contexts += t.contexts;
        deliveries += t.deliveries;
        not_processed += t.not_processed;
        listener_calls += t.listener_calls;
        return *this;
    }
    friend tally operator-(tally a, const tally& b) {
        a.contexts -= b.contexts;
        a.deliveries -= b.deliveries;
        a.not_processed -= b.not_processed;
        a.listener_calls -= b.listener_calls;
        a.duplicates -= b.duplicates;
        return a;
    }
};

/// One inbox (one service instance) delivering whole contexts, in declared order, on one thread.
template <class Store>
class worker {
public:
    using inbox_type = seqinbox::basic_inbox<Store, seqinbox::memory::source, seqinbox::memory::error_sink>;

    worker(Store& store, std::string prefix)
        : inbox_(store, source_, sink_, chain_declarations()), prefix_(std::move(prefix)) {
        for (const auto& type : chain_types)
            inbox_.on(type, [this](const std::string&, const typename inbox_type::context&) { ++done_.listener_calls; });
    }

    worker(const worker&) = delete;
    worker& operator=(const worker&) = delete;

    void deliver_next_context() {
        const std::string context = prefix_ + "-" + std::to_string(done_.contexts++);
        for (const auto& type : chain_types) {
            const auto result = inbox_.deliver(seqinbox::testing::record(type, context + "-" + type, context));
            ++done_.deliveries;
            if (result.outcome != seqinbox::outcome::processed) ++done_.not_processed;
        }
    }

    /// One batch of at least batch_size records of fresh contexts (the batch workload above).
    void deliver_next_batch() {
        std::vector<seqinbox::envelope> records;
        std::size_t fresh = 0;
        while (records.size() < batch_size) {
            const std::size_t index = done_.contexts++;
            const std::string context = prefix_ + "-" + std::to_string(index);
            for (std::size_t i = 0; i < chain_types.size(); ++i) {
                const auto& type = chain_types[index % 2 == 0 ? i : chain_types.size() - 1 - i];
                records.push_back(seqinbox::testing::record(type, context + "-" + type, context));
                if (++fresh % 5 == 0) records.push_back(records.back());
            }
        }
        inbox_.deliver_batch(std::span<const seqinbox::envelope>(records));
        done_.deliveries += fresh;
        done_.duplicates += records.size() - fresh;
    }

    const tally& done() const noexcept { return done_; }
    std::size_t error_sink_size() const { return sink_.size(); }

private:
    seqinbox::memory::source source_;
    seqinbox::memory::error_sink sink_;
    inbox_type inbox_;
    std::string prefix_;
    tally done_;
};

/// When a worker stops: at a deadline, or after a number of contexts.
struct stop_rule {
    std::optional<clock_type::time_point> deadline;
    std::size_t contexts = 0;

    bool reached(std::size_t contexts_done) const {
        return deadline ? clock_type::now() >= *deadline : contexts_done >= contexts;
    }
};

struct run_result {
    tally done;
    double seconds = 0;
    std::uint64_t round_trips = 0;

    /// Duplicates count: the inbox decides them too.
    double deliveries_per_s() const { return static_cast<double>(done.deliveries + done.duplicates) / seconds; }
};

template <class Store>
using workers = std::vector<std::unique_ptr<worker<Store>>>;

template <class Store>
workers<Store> make_workers(Store& store, std::size_t threads, const std::string& run_name) {
    workers<Store> w;
    for (std::size_t i = 0; i < threads; ++i)
        w.push_back(std::make_unique<worker<Store>>(store, run_name + "-t" + std::to_string(i)));
    return w;
}

template <class Store>
tally total_of(const workers<Store>& w) {
    tally t;
    for (const auto& one : w) t += one->done();
    return t;
}

/// How a worker delivers: context by context, or batch by batch.
enum class unit { context, batch };

template <class Store>
void deliver_next(worker<Store>& w, unit u) {
    if (u == unit::batch) w.deliver_next_batch();
    else w.deliver_next_context();
}

/// Runs every worker on a thread of its own until `stop`; rethrows the first failure.
template <class Store>
void run_until(workers<Store>& w, const stop_rule& stop, unit u = unit::context) {
    std::vector<std::exception_ptr> failures(w.size());
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < w.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                const std::size_t start = w[i]->done().contexts;
                while (!stop.reached(w[i]->done().contexts - start)) deliver_next(*w[i], u);
            } catch (...) {
                failures[i] = std::current_exception();
            }
        });
    threads.clear();  // joins
    for (const auto& f : failures)
        if (f) std::rethrow_exception(f);
}

/// Per worker: how many contexts it delivers in a run of `deliveries` (0: until `seconds`).
inline stop_rule stop_after(const run_length& o, std::size_t threads) {
    if (o.deliveries == 0) return {clock_type::now() + std::chrono::seconds(o.seconds), 0};
    const std::size_t per_thread = (o.deliveries + threads - 1) / threads;
    return {std::nullopt, std::max<std::size_t>(1, (per_thread + chain_types.size() - 1) / chain_types.size())};
}

constexpr std::size_t warmup_contexts = 20;  // per worker: connections opened, statements prepared

/// Warms the workers up, then measures `threads` of them delivering until the stop rule.
/// `total` accumulates everything delivered, warm-up included, for the final verification.
/// Store: any store whose statistics() count its round_trips.
template <class Store>
run_result measure_inbox(Store& store, std::size_t threads, const std::string& run_name, const run_length& o,
                         tally& total, unit u = unit::context) {
    auto w = make_workers(store, threads, run_name);
    run_until(w, stop_rule{std::nullopt, warmup_contexts}, u);
    const tally before = total_of(w);
    const std::uint64_t round_trips_before = store.statistics().round_trips;
    const auto started = clock_type::now();
    run_until(w, stop_after(o, threads), u);
    run_result r;
    r.seconds = elapsed_s(started, clock_type::now());
    r.round_trips = store.statistics().round_trips - round_trips_before;
    r.done = total_of(w) - before;
    for (const auto& one : w) require(one->error_sink_size() == 0, run_name + ": the error sink is not empty");
    total += total_of(w);
    return r;
}

inline void require_all_processed(const run_result& r, const std::string& run_name) {
    require(r.done.deliveries > 0, run_name + ": no delivery was made");
    require(r.done.not_processed == 0,
            run_name + ": " + std::to_string(r.done.not_processed) + " deliveries were not processed at once");
    require(r.done.listener_calls == r.done.deliveries, run_name + ": " + std::to_string(r.done.listener_calls) +
                                                            " listener calls for " + std::to_string(r.done.deliveries) +
                                                            " deliveries");
}

}  // namespace seqinbox::bench
