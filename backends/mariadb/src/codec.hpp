#pragma once
// Private to seqinbox::mariadb: values as SQL text, and rows read back. Every value a statement
// carries is written into its text here: bytes as hex literals (X'..', binary-safe and never
// interpreted), numbers in decimal, times as microseconds since the epoch. SOCI's MySQL backend
// substitutes its bound values into the text too (it prepares nothing on the server), so this
// costs nothing and keeps multi-row statements, whose size varies, in one place.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <soci/soci.h>

#include "result_row.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::mariadb::detail {

/// X'<hex>': the bytes of `value`, whatever they are.
std::string bytes_literal(std::string_view value);
/// bytes_literal, or NULL.
std::string nullable_bytes_literal(const std::optional<std::string>& value);
/// A DATETIME(6) expression for `t` in UTC (no session time zone involved).
std::string time_literal(timestamp t);
/// `column` (DATETIME(6)) as BIGINT microseconds since the epoch.
std::string microseconds_of(std::string_view column);
/// "<prefix>message_type = X'..' AND <prefix>idempotence_id = X'..'": a claim key as a primary
/// key lookup. Not a row constructor, `(a, b) = (x, y)`: InnoDB reads such a condition by a scan,
/// and a DELETE locks (so waits for) every row the scan passes, another key's uncommitted claim
/// included.
std::string key_condition(const claim_key& key, std::string_view prefix = "");
/// key_condition of any of `keys` (ORed): one range per key for the optimizer.
std::string any_key(const std::vector<claim_key>& keys, std::string_view prefix = "");
/// "a, b, c" of `values` rendered by `render`.
template <class Range, class Render>
std::string listed(const Range& values, Render render) {
    std::string text;
    for (const auto& v : values) {
        if (!text.empty()) text += ", ";
        text += render(v);
    }
    return text;
}

/// `items` joined by `separator` into consecutive lists of at most `budget` bytes each (an item
/// longer than that alone): the lists of multi-row statements too long for one query.
std::vector<std::string> joined_within(const std::vector<std::string>& items, std::string_view separator, std::size_t budget);

timestamp from_microseconds(long long us);
std::string_view state_text(message_state s);
message_state parse_message_state(std::string_view s);
/// An instance's pending_action as written by to_string(instance_action).
instance_action parse_instance_action(std::string_view s);

/// Headers as record_headers keeps them (see schema/mariadb/V1), and back.
std::string encode_headers(const std::vector<header>& headers);
std::vector<header> decode_headers(std::string_view bytes);

/// Column `i` of a row read through soci::row (migrations) or the store's connection: text
/// (NULL: empty), integer (NULL: 0), null.
std::string text_at(const soci::row& row, std::size_t i);
long long number_at(const soci::row& row, std::size_t i);
bool null_at(const soci::row& row, std::size_t i);
std::string text_at(const row& r, std::size_t i);
long long number_at(const row& r, std::size_t i);
bool null_at(const row& r, std::size_t i);

/// The columns message_at reads, of sequenced_message `m`, without and with its record.
std::string message_columns();
std::string message_columns_with_record();
/// A message row read from message_columns() (and, with `with_record`, the record columns
/// that follow), starting at column `first`.
message_record message_at(const row& row, bool with_record, std::size_t first = 0);
/// How many columns message_columns() has.
inline constexpr std::size_t message_column_count = 8;

/// The columns of sequence_instance `i` that instance_at reads.
std::string instance_columns();
sequence_instance instance_at(const row& row, std::size_t first = 0);
/// How many columns instance_columns() has.
inline constexpr std::size_t instance_column_count = 7;

}  // namespace seqinbox::mariadb::detail
