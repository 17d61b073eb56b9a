#pragma once
#include <chrono>
#include <mutex>
#include <ostream>
#include <string_view>

#include "seqinbox/logger/concept.hpp"
#include "seqinbox/logger/utc_time.hpp"

namespace seqinbox::logger {

/// Writes `time level message` lines to a stream, the time in ISO-8601 UTC with milliseconds
/// (2026-12-01T15:40:08.123Z info relay started); thread-safe (one line at a time). Copies share
/// the stream and its mutex; the stream must outlive them.
class stream_logger {
public:
    explicit stream_logger(std::ostream& out, log_level threshold = log_level::info)
        : out_(&out), threshold_(threshold) {}

    bool enabled(log_level level) const { return level >= threshold_; }

    void log(log_level level, std::string_view message) {
        static std::mutex mutex;  // one per process: streams are shared, lines must not interleave
        std::lock_guard lock(mutex);
        *out_ << utc_time(std::chrono::system_clock::now()) << ' ' << to_string(level) << ' ' << message << '\n';
    }

private:
    std::ostream* out_;
    log_level threshold_;
};

}  // namespace seqinbox::logger
