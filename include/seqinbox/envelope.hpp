#pragma once
// What arrives from a message source: the raw record and where it came from.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace seqinbox {

using timestamp = std::chrono::system_clock::time_point;

struct header {
    std::string name{};
    std::string value{};
    friend bool operator==(const header&, const header&) = default;
};

/// The key or the value of a record. Null (std::nullopt) and empty are different things and are
/// kept apart everywhere: Kafka's null key (no key) and null value (a compacted topic's
/// tombstone) are produced, stored and replayed as null, an empty one as empty.
using record_bytes = std::optional<std::string>;

/// A raw delivery: key, value and headers plus its origin. Stored verbatim when buffered.
struct envelope {
    record_bytes key{};
    record_bytes value{};
    std::vector<header> headers{};
    std::string topic{};
    std::int32_t partition = 0;
    std::int64_t offset = -1;
    timestamp time{};
    std::string cluster{};

    /// First header named `name`, if any.
    std::optional<std::string_view> find_header(std::string_view name) const {
        for (const auto& h : headers)
            if (h.name == name) return std::string_view(h.value);
        return std::nullopt;
    }

    friend bool operator==(const envelope&, const envelope&) = default;
};

/// The W3C trace context header restored when a buffered message is replayed.
inline constexpr std::string_view traceparent_header = "traceparent";

}  // namespace seqinbox
