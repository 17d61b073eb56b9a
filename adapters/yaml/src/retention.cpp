// Retention periods, deduplication windows and gap timeouts: `<n><unit>` with unit s, m, h or d, or ISO-8601 P[nW][nD][T[nH][nM][nS]].
#include <chrono>
#include <cstdint>
#include <algorithm>
#include <string>
#include <string_view>
#include <variant>

#include "seqinbox/declare/max_retention.hpp"
#include "seqinbox/yaml/retention.hpp"

namespace seqinbox::yaml {

namespace {

// Ten years: more is surely a typo, and keeps every sum far from overflow.
constexpr std::int64_t max_seconds = max_retention.count();

std::int64_t unit_seconds(char unit) {
    switch (unit) {
    case 's': case 'S': return 1;
    case 'm': case 'M': return 60;
    case 'h': case 'H': return 3600;
    case 'd': case 'D': return 24 * 3600;
    case 'w': case 'W': return 7 * 24 * 3600;
    default: return 0;
    }
}

/// Reads digits at `pos` (saturating just above max_seconds); false when there are none.
bool read_number(std::string_view text, std::size_t& pos, std::int64_t& n) {
    const std::size_t start = pos;
    n = 0;
    for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos)
        n = std::min(n * 10 + (text[pos] - '0'), max_seconds + 1);
    return pos > start;
}

const std::string formats = "expected e.g. 24h, 30m, 90s, 7d, P7D or PT1H30M";

std::variant<std::int64_t, std::string> parse_iso(std::string_view text) {
    std::size_t pos = 1;  // after P
    bool in_time = false, any = false;
    std::string order = "WD";  // units allowed next, in ISO order
    std::int64_t total = 0;
    while (pos < text.size()) {
        if (text[pos] == 'T' && !in_time) {
            in_time = true;
            order = "HMS";
            ++pos;
            if (pos == text.size()) return "'T' must be followed by hours, minutes or seconds";
            continue;
        }
        std::int64_t n = 0;
        if (!read_number(text, pos, n)) return std::string("expected a whole number at position ") + std::to_string(pos + 1);
        if (pos == text.size()) return "the number at the end has no unit";
        const char unit = text[pos++];
        if (!in_time && (unit == 'Y' || unit == 'M'))
            return "years and months have no fixed length; use weeks or days (e.g. P30D)";
        const auto at = order.find(unit);
        if (at == std::string::npos) return std::string("unexpected '") + unit + "'";
        order.erase(0, at + 1);  // each unit once, in order
        total += n * unit_seconds(unit);
        if (total > max_seconds) return "longer than ten years";
        any = true;
    }
    if (!any) return "no duration after 'P'";
    return total;
}

/// A period named `what` in problems; zero is accepted only when `zero_allowed`.
std::variant<std::chrono::seconds, std::string> parse_period(std::string_view text, const std::string& what, bool zero_allowed) {
    const std::string quoted = "'" + std::string(text) + "'";
    if (text.empty()) return what + " is empty; " + formats;
    if (text.front() == '-' || text.front() == '+')
        return what + " " + quoted + (zero_allowed ? " must not be negative" : " must be positive") + " (a sign is not allowed)";
    std::int64_t total = 0;
    if (text.front() == 'P' || text.front() == 'p') {
        auto iso = parse_iso(text);
        if (auto* why = std::get_if<std::string>(&iso))
            return "malformed ISO-8601 " + what + " " + quoted + ": " + *why + "; " + formats;
        total = std::get<std::int64_t>(iso);
    } else {
        std::size_t pos = 0;
        std::int64_t n = 0;
        const bool number = read_number(text, pos, n);
        if (number && pos + 1 == text.size() && std::string_view("smhd").find(text[pos]) != std::string_view::npos) {
            total = n * unit_seconds(text[pos]);
        } else if (number && pos == text.size()) {
            return what + " " + quoted + " has no unit; " + formats;
        } else {
            return "malformed " + what + " " + quoted + "; " + formats;
        }
    }
    if (total == 0 && !zero_allowed) return what + " " + quoted + " must be positive, not zero";
    if (total > max_seconds) return what + " " + quoted + " is longer than ten years";
    return std::chrono::seconds(total);
}

}  // namespace

std::variant<std::chrono::seconds, std::string> parse_retention(std::string_view text) {
    return parse_period(text, "retention period", false);
}

std::variant<std::chrono::seconds, std::string> parse_deduplication_window(std::string_view text) {
    return parse_period(text, "deduplication window", true);
}

std::variant<std::chrono::seconds, std::string> parse_gap_timeout(std::string_view text) {
    return parse_period(text, "gap timeout", false);
}

}  // namespace seqinbox::yaml
