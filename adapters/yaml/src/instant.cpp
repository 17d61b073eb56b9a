// RFC 3339 instants: YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM).
#include "seqinbox/yaml/instant.hpp"

#include <chrono>
#include <optional>

namespace seqinbox::yaml {

namespace {

/// A reader over the text that fails (returns nullopt) at the first unexpected character.
class cursor {
public:
    explicit cursor(std::string_view text) : text_(text) {}

    std::optional<int> digits(std::size_t count) {
        if (pos_ + count > text_.size()) return std::nullopt;
        int n = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const char c = text_[pos_ + i];
            if (c < '0' || c > '9') return std::nullopt;
            n = n * 10 + (c - '0');
        }
        pos_ += count;
        return n;
    }
    bool skip(char expected) { return skip_any(std::string_view(&expected, 1)); }
    bool skip_any(std::string_view allowed) {
        if (pos_ >= text_.size() || allowed.find(text_[pos_]) == std::string_view::npos) return false;
        ++pos_;
        return true;
    }
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    bool at_end() const { return pos_ == text_.size(); }

    /// Digits after a decimal point, as microseconds (beyond six digits are dropped).
    std::optional<std::chrono::microseconds> fraction() {
        std::int64_t micros = 0;
        int seen = 0;
        for (; peek() >= '0' && peek() <= '9'; ++pos_, ++seen)
            if (seen < 6) micros = micros * 10 + (peek() - '0');
        if (seen == 0) return std::nullopt;
        for (int i = seen; i < 6; ++i) micros *= 10;
        return std::chrono::microseconds(micros);
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

const std::string expected = "expected an RFC 3339 instant with offset, e.g. 2026-12-01T00:00:00Z";

/// The offset east of UTC, or nullopt when malformed.
std::optional<std::chrono::minutes> offset(cursor& in) {
    if (in.skip_any("Zz")) return std::chrono::minutes(0);
    const char sign = in.peek();
    if (!in.skip_any("+-")) return std::nullopt;
    const auto hours = in.digits(2);
    if (!hours || !in.skip(':')) return std::nullopt;
    const auto minutes = in.digits(2);
    if (!minutes || *hours > 23 || *minutes > 59) return std::nullopt;
    const std::chrono::minutes east(*hours * 60 + *minutes);
    return sign == '-' ? -east : east;
}

}  // namespace

std::variant<timestamp, std::string> parse_instant(std::string_view text) {
    using namespace std::chrono;
    cursor in(text);
    const auto y = in.digits(4);
    const bool date_ok = y && in.skip('-');
    const auto mo = date_ok ? in.digits(2) : std::nullopt;
    const auto d = mo && in.skip('-') ? in.digits(2) : std::nullopt;
    const auto h = d && in.skip_any("Tt") ? in.digits(2) : std::nullopt;
    const auto mi = h && in.skip(':') ? in.digits(2) : std::nullopt;
    const auto s = mi && in.skip(':') ? in.digits(2) : std::nullopt;
    if (!s) return "'" + std::string(text) + "': " + expected;
    microseconds fraction{0};
    if (in.skip('.')) {
        const auto f = in.fraction();
        if (!f) return "'" + std::string(text) + "': no digits after the decimal point";
        fraction = *f;
    }
    const auto east = offset(in);
    if (!east || !in.at_end()) return "'" + std::string(text) + "': " + expected;
    if (*y < 1970 || *y > 2200)  // beyond, the clock's nanoseconds would overflow; surely a typo
        return "'" + std::string(text) + "': the year must be between 1970 and 2200";
    const year_month_day date{year(*y), month(static_cast<unsigned>(*mo)), day(static_cast<unsigned>(*d))};
    if (!date.ok() || *h > 23 || *mi > 59 || *s > 59)
        return "'" + std::string(text) + "': a field is out of range (month, day, hour, minute or second)";
    const auto local = sys_days(date) + hours(*h) + minutes(*mi) + seconds(*s) + fraction;
    return time_point_cast<timestamp::duration>(local - *east);
}

}  // namespace seqinbox::yaml
