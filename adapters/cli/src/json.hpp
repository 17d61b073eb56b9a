#pragma once
// Output helpers shared by the subcommands: JSON strings and UTC times.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>

namespace seqinbox::cli {

/// `s` as a JSON string literal, control characters escaped.
inline std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buffer[8];
                std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
                out += buffer;
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}

/// `t` as RFC 3339 UTC with milliseconds: 2026-11-30T12:00:00.000Z.
inline std::string utc_time(std::chrono::system_clock::time_point t) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
    const std::time_t seconds = std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(ms));
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char text[96];  // room for any int the fields could hold
    const auto millis = static_cast<int>((ms.time_since_epoch() % std::chrono::seconds(1)).count());
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                  parts.tm_hour, parts.tm_min, parts.tm_sec, (millis + 1000) % 1000);
    return text;
}

}  // namespace seqinbox::cli
