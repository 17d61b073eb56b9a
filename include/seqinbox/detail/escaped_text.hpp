#pragma once
// One home for showing untrusted text (from a record, a database row or an exception) inside
// our own messages and log lines: escaped to printable ASCII, so it can neither break a line nor
// carry terminal control sequences or invalid UTF-8, and bounded in length.
#include <cstddef>
#include <string>
#include <string_view>

namespace seqinbox::detail {

/// Length of the valid UTF-8 sequence starting at s[i], 0 when it is invalid (overlong forms,
/// surrogates and code points above U+10FFFF included).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

/// Whether `text` is valid UTF-8.
bool is_utf8(std::string_view text);

/// `text` with each byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string utf8_repaired(std::string_view text);

/// At most `limit` bytes of `value` (then "..."), control and non-ASCII bytes as \xNN. Its
/// output is printable ASCII and escapes to itself, so text escaped twice reads the same.
std::string escaped(std::string_view value, std::size_t limit = std::string_view::npos);

/// A value quoted in an error message about it: its first 60 bytes, escaped.
std::string printable(std::string_view value);

/// Bytes of a record's field that a log line shows: every storable key (seqinbox::max_key_bytes)
/// whole, any other text bounded.
inline constexpr std::size_t logged_bytes = 1024;

/// A record's field (type, id, context id) or a reason quoting one, as a log line shows it.
std::string loggable(std::string_view value);

/// A message as log lines name it: `type/idempotence-id`, then ` context ID` when it has one.
std::string loggable_message(std::string_view type, std::string_view idempotence_id, std::string_view context_id = {});

}  // namespace seqinbox::detail
