#pragma once
// What text a store can keep. PostgreSQL text holds no NUL byte and only valid UTF-8, and a
// B-tree index entry is limited to about 2.7 kB, so claim keys and context ids are bounded. The
// engine rejects such deliveries up front on every backend, so both backends agree; the
// PostgreSQL store checks the same rules again for callers that bypass the engine.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/envelope.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// Longest qualified type, idempotence id or context id, in bytes.
inline constexpr std::size_t max_key_bytes = 1024;
static_assert(max_key_bytes <= detail::logged_bytes, "log lines show every storable key whole");

/// Why `value` cannot be stored as text (NUL byte, invalid UTF-8), or an empty string.
/// `what` names the value in the message ("idempotence id").
inline std::string text_problem(std::string_view what, std::string_view value) {
    for (std::size_t i = 0; i < value.size();) {
        const std::size_t length = value[i] == '\0' ? 0 : detail::utf8_sequence_length(value, i);
        if (length == 0)
            return std::string(what) + " '" + detail::printable(value) + "' " +
                   (value[i] == '\0' ? "contains a NUL byte" : "is not valid UTF-8") + " at byte " + std::to_string(i);
        i += length;
    }
    return {};
}

/// Like text_problem, and also longer than max_key_bytes.
inline std::string key_problem(std::string_view what, std::string_view value) {
    if (value.size() > max_key_bytes)
        return std::string(what) + " '" + detail::printable(value) + "' is " + std::to_string(value.size()) +
               " bytes long; at most " + std::to_string(max_key_bytes) + " are allowed";
    return text_problem(what, value);
}

/// The first non-empty problem of `problems`, or an empty string.
inline std::string first_problem(std::initializer_list<std::string> problems) {
    for (const auto& problem : problems)
        if (!problem.empty()) return problem;
    return {};
}

/// Why a store cannot keep the claim key (message type, idempotence id), or an empty string.
inline std::string claim_key_problem(std::string_view type, std::string_view idempotence_id) {
    return first_problem({key_problem("message type", type), key_problem("idempotence id", idempotence_id)});
}

/// Why a store cannot keep `record` with a buffered message (its topic, cluster and header
/// names; keys and values are bytes), or an empty string.
inline std::string record_problem(const envelope& record) {
    if (auto problem = first_problem({text_problem("topic", record.topic), text_problem("cluster", record.cluster)}); !problem.empty())
        return problem;
    for (const auto& h : record.headers)
        if (auto problem = text_problem("header name", h.name); !problem.empty()) return problem;
    return {};
}

/// Why a store cannot keep `row`: its claim key, then its record when it has one; or "".
inline std::string storage_problem(const message_record& row) {
    if (auto problem = claim_key_problem(row.type, row.idempotence_id); !problem.empty() || !row.payload) return problem;
    return record_problem(*row.payload);
}

}  // namespace seqinbox
