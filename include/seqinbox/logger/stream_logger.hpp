#pragma once
#include <chrono>
#include <mutex>
#include <ostream>
#include <string>
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

    /// The line goes to the stream in one write: on an unbuffered stream (std::cerr) that is one
    /// write(2), which other writers of the same file cannot cut.
    void log(log_level level, std::string_view message) {
        static std::mutex mutex;  // one per process: streams are shared, lines must not interleave
        std::lock_guard lock(mutex);
        std::string line = utc_time(std::chrono::system_clock::now());  // under the lock: lines in time order
        line.append(" ").append(to_string(level)).append(" ").append(message).append("\n");
        out_->write(line.data(), static_cast<std::streamsize>(line.size()));
    }

private:
    std::ostream* out_;
    log_level threshold_;
};

}  // namespace seqinbox::logger
