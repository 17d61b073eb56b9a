#pragma once
// Private to the relay: runs jobs at fixed intervals on a thread of its own until stopped. A job
// that throws is reported and runs again at its next time; a slow job delays the others (they
// share the thread), which keeps the database load of the jobs to one connection.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace seqinbox::relay::detail {

class job_schedule {
public:
    using clock = std::chrono::steady_clock;

    struct job {
        std::chrono::milliseconds every;
        std::function<void()> run;  ///< exceptions are the job's own business: catch and report them inside
        clock::time_point next{};
    };

    explicit job_schedule(std::vector<job> jobs) : jobs_(std::move(jobs)) {
        for (auto& j : jobs_) j.next = clock::now() + j.every;
        thread_ = std::thread([this] { loop(); });
    }
    ~job_schedule() { stop(); }
    job_schedule(const job_schedule&) = delete;
    job_schedule& operator=(const job_schedule&) = delete;

    /// Waits for a running job to end, then ends the thread. Idempotent.
    void stop() {
        {
            const std::scoped_lock lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

private:
    void loop() {
        std::unique_lock lock(mutex_);
        while (!wake_.wait_until(lock, earliest(), [this] { return stopping_; })) {
            lock.unlock();
            run_due();
            lock.lock();
        }
    }

    clock::time_point earliest() const {
        auto t = clock::time_point::max();
        for (const auto& j : jobs_) t = std::min(t, j.next);
        return t;
    }

    void run_due() {
        for (auto& j : jobs_)
            if (clock::now() >= j.next) {
                j.run();
                j.next = clock::now() + j.every;
            }
    }

    std::vector<job> jobs_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;  // last: starts once the rest is set
};

}  // namespace seqinbox::relay::detail
