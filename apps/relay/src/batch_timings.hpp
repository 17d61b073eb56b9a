#pragma once
// Where the consumer threads' time goes, summed over their batches: waiting for the broker (the
// poll, with the batch linger), deciding (the store's claims, reads and writes and the
// listeners' produce calls), awaiting the publications' acknowledgements, committing (the
// commit's round trip and WAL flush, the acknowledgements to the source). The relay logs the
// totals when it stops (one line, `relay batches: ...`), with the store's round trips, so that
// a run's breakdown per batch is in its log (bench_relay prints it). A few clock reads per batch.
// Thread-safe: any consumer thread adds, any thread reads.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace seqinbox::relay::detail {

class batch_timings {
public:
    using clock = std::chrono::steady_clock;

    /// The moments of one batch on one consumer thread, as decide_next meets them.
    struct batch {
        clock::time_point started, polled, awaiting, awaited, ended;
        std::size_t records = 0;
    };

    void add(const batch& b) {
        if (b.records == 0) {  // an empty poll: all of it was waiting for the broker
            idle_us_ += micros(b.started, b.ended);
            return;
        }
        ++batches_;
        records_ += b.records;
        polling_us_ += micros(b.started, b.polled);
        deciding_us_ += micros(b.polled, b.awaiting);
        awaiting_us_ += micros(b.awaiting, b.awaited);
        committing_us_ += micros(b.awaited, b.ended);
    }

    /// `relay batches: N records: N polling_ms: N ...`, sums over every consumer thread.
    std::string describe(std::uint64_t round_trips) const {
        const auto ms = [](const std::atomic<std::uint64_t>& us) { return std::to_string(us.load() / 1000); };
        return "relay batches: " + std::to_string(batches_.load()) + " records: " + std::to_string(records_.load()) +
               " round_trips: " + std::to_string(round_trips) + " polling_ms: " + ms(polling_us_) + " deciding_ms: " + ms(deciding_us_) +
               " awaiting_ms: " + ms(awaiting_us_) + " committing_ms: " + ms(committing_us_) + " idle_polls_ms: " + ms(idle_us_);
    }

private:
    static std::uint64_t micros(clock::time_point from, clock::time_point to) {
        return to > from ? static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(to - from).count()) : 0;
    }

    std::atomic<std::uint64_t> batches_{0}, records_{0}, polling_us_{0}, deciding_us_{0}, awaiting_us_{0}, committing_us_{0}, idle_us_{0};
};

}  // namespace seqinbox::relay::detail
