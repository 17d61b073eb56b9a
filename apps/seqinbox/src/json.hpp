#pragma once
// Output helpers shared by the subcommands: JSON strings and UTC times.
#include <cstdio>
#include <string>
#include <string_view>

#include "seqinbox/logger/utc_time.hpp"

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

using seqinbox::logger::utc_time;

}  // namespace seqinbox::cli
