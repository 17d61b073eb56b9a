#pragma once
// Private to seqinbox::postgresql: how values cross SOCI. Time travels as microseconds since the
// epoch (SOCI's std::tm drops fractions and offsets); bytes travel as hex text, because SOCI
// passes std::string parameters as C strings and would cut them at the first NUL.
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/envelope.hpp"

namespace seqinbox::postgresql::detail {

/// SQL turning the bigint parameter `param` (":name") into timestamptz, and back.
std::string sql_timestamp(std::string_view param);
std::string sql_microseconds(std::string_view column);

long long to_microseconds(timestamp t);
timestamp from_microseconds(long long us);

std::string to_hex(std::string_view bytes);
/// Throws seqinbox::error(internal) on text that is not hex.
std::string from_hex(std::string_view hex);

/// Headers as "name.value,name.value" with both parts hex: no separator can occur inside.
std::string encode_headers(const std::vector<header>& headers);
std::vector<header> decode_headers(std::string_view text);

/// Types as "hex,hex" for `unnest(string_to_array(:types, ','))`.
std::string encode_list(const auto& items) {
    std::string text;
    for (const auto& item : items) {
        if (!text.empty()) text += ',';
        text += to_hex(item);
    }
    return text;
}

}  // namespace seqinbox::postgresql::detail
