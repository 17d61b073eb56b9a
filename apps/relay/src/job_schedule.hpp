#pragma once
// Private to the relay: runs jobs at fixed intervals until stopped, each job on a thread of its
// own, so that a slow job (a housekeeping run lasts minutes) never delays another (operator
// actions take effect within seconds). Each job holds its own database connections while it
// runs: the relay's pool counts them (relay.cpp). A job that throws is reported and runs again
// at its next time.
//
// Thread safety: stop() from one thread (the destructor calls it); each job's function is only
// ever called by its own thread, never concurrently with itself.
#include <chrono>
#include <functional>
#include <stop_token>
#include <thread>
#include <vector>

#include "seqinbox/detail/stoppable_wait.hpp"

namespace seqinbox::relay::detail {

class job_schedule {
public:
    struct job {
        std::chrono::milliseconds every;
        /// Exceptions are the job's own business: catch and report them inside. A long job ends
        /// early once its stop token is requested (stop()).
        std::function<void(std::stop_token)> run;
    };

    explicit job_schedule(std::vector<job> jobs) {
        for (auto& j : jobs) threads_.emplace_back([j = std::move(j)](std::stop_token stop) { repeat(j, stop); });
    }
    ~job_schedule() { stop(); }
    job_schedule(const job_schedule&) = delete;
    job_schedule& operator=(const job_schedule&) = delete;

    /// Asks every job to end (its stop token), then waits for the threads. Idempotent.
    void stop() {
        for (auto& t : threads_) t.request_stop();  // all first: they end in parallel
        threads_.clear();                            // joins
    }

private:
    /// Runs `j` every `j.every` (from the end of a run to the start of the next) until `stop`.
    static void repeat(const job& j, const std::stop_token& stop) {
        while (!seqinbox::detail::wait_unless_stopped(j.every, stop)) j.run(stop);
    }

    std::vector<std::jthread> threads_;
};

}  // namespace seqinbox::relay::detail
