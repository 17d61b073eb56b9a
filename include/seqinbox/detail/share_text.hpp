#pragma once
// A share (a fraction of a retention period) given as text by an operator: the CLI's --share and
// --expiring-share, the operator API's share parameter. Only a plain decimal is taken, so that
// what strtod would also read (a hexadecimal float, an exponent, a sign, leading blanks, text
// after a NUL) is refused rather than read differently from what the operator sees.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace seqinbox::detail {

/// The share in `text` when it is digits with at most one '.' and nothing else, in (0, 1];
/// nothing otherwise.
inline std::optional<double> plain_share(std::string_view text) {
    const bool plain = text.find_first_not_of("0123456789.") == std::string_view::npos && std::ranges::count(text, '.') <= 1 &&
                       text.find_first_of("0123456789") != std::string_view::npos;
    if (!plain) return std::nullopt;
    double share = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), share, std::chars_format::fixed);
    if (ec != std::errc{} || end != text.data() + text.size() || !(share > 0 && share <= 1)) return std::nullopt;
    return share;
}

}  // namespace seqinbox::detail
