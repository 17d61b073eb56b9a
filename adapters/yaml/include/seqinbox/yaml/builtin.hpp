#pragma once
// Extractors and subtype resolvers usable by name in declaration files without any C++:
//   key            the record key as text
//   header:NAME    the value of the first header NAME
//   json:/pointer  an RFC 6901 pointer into the JSON record value
// They read only the envelope, so they work for every message type.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "seqinbox/envelope.hpp"

namespace seqinbox::yaml {

/// Reads a value from a raw delivery; nothing when it is absent.
using envelope_reader = std::function<std::optional<std::string>(const envelope&)>;

struct builtin_lookup {
    enum class status { not_builtin, ok, malformed };
    status state = status::not_builtin;
    envelope_reader read{};  ///< set when ok
    std::string problem{};   ///< why a built-in name is malformed
};

/// Whether `name` is a built-in (`key`, `header:...`, `json:...`) and, if so, its reader.
builtin_lookup find_builtin(std::string_view name);

/// `text` as a sequence number: a non-negative decimal that fits an int64, the whole text (no
/// sign, space, fraction or exponent); anything else is no number.
std::optional<std::int64_t> parse_sequence_number(std::string_view text);

/// Evaluates the RFC 6901 `pointer` on the JSON text `json`. A string yields its unescaped
/// text, a number its literal text, a boolean `true`/`false`; null, objects, arrays, a missing
/// member, and text that is not valid JSON yield nothing. The first of duplicate members wins.
std::optional<std::string> json_pointer_value(std::string_view json, std::string_view pointer);

/// Why `pointer` is not an RFC 6901 pointer (empty when it is one).
std::string json_pointer_problem(std::string_view pointer);

}  // namespace seqinbox::yaml
