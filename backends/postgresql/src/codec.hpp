#pragma once
// Private to seqinbox::postgresql: how values cross SOCI. Time travels as microseconds since the
// epoch (SOCI's std::tm drops fractions and offsets); bytes travel as hex text, because SOCI
// passes std::string parameters as C strings and would cut them at the first NUL. Enums travel
// as the schema's text (the core's to_string), read back by the parse_ functions below.
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/envelope.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::postgresql::detail {

/// SQL turning the bigint parameter `param` (":name") into timestamptz, and back.
std::string sql_timestamp(std::string_view param);
std::string sql_microseconds(std::string_view column);

long long to_microseconds(timestamp t);
timestamp from_microseconds(long long us);
/// to_microseconds as a parameter of a batched statement.
std::string microseconds_text(timestamp t);

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

/// `item` quoted as an element of an array literal.
inline void append_array_element(std::string& text, std::string_view item) {
    text += '"';
    for (char c : item) {
        if (c == '"' || c == '\\') text += '\\';
        text += c;
    }
    text += '"';
}

/// Items as a PostgreSQL array literal, {"a","b"}, for a text[] or bigint[] parameter (unlike
/// encode_list, its elements can meet an index: no decoding in SQL). An empty optional item is
/// NULL.
std::string array_literal(const auto& items) {
    std::string text = "{";
    for (const auto& item : items) {
        if (text.size() > 1) text += ',';
        if constexpr (requires { item.has_value(); }) {
            if (item) append_array_element(text, *item);
            else text += "NULL";
        } else {
            append_array_element(text, item);
        }
    }
    return text + "}";
}

/// The enum value the schema spells `text` (a CHECK constraint or seqinbox_store_message's
/// answer); throws seqinbox::error(internal) naming a text it does not know.
message_state parse_message_state(std::string_view text);
instance_state parse_instance_state(std::string_view text);
message_action parse_message_action(std::string_view text);
instance_action parse_instance_action(std::string_view text);
stored_as parse_stored_as(std::string_view text);

}  // namespace seqinbox::postgresql::detail
