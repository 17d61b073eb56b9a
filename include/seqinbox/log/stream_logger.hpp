#pragma once
#include <mutex>
#include <ostream>
#include <string_view>

#include "seqinbox/log/concept.hpp"

namespace seqinbox::log {

/// Writes `level message` lines to a stream; thread-safe (one line at a time). Copies share the
/// stream and its mutex; the stream must outlive them.
class stream_logger {
public:
    explicit stream_logger(std::ostream& out, log_level threshold = log_level::info)
        : out_(&out), threshold_(threshold) {}

    bool enabled(log_level level) const { return level >= threshold_; }

    void log(log_level level, std::string_view message) {
        static std::mutex mutex;  // one per process: streams are shared, lines must not interleave
        std::lock_guard lock(mutex);
        *out_ << to_string(level) << ' ' << message << '\n';
    }

private:
    std::ostream* out_;
    log_level threshold_;
};

}  // namespace seqinbox::log
