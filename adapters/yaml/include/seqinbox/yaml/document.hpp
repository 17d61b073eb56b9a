#pragma once
// The YAML declaration format (docs/declarations.md) parsed into a plain model: names instead of callables,
// and the file:line:col of every node a problem can be about. Compiled; yaml-cpp stays inside.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/condition.hpp"
#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/declare/problems.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/envelope.hpp"

namespace seqinbox::yaml {

/// A position in a declaration file; line and column count from 1 (0: unknown).
struct mark {
    std::size_t line = 0;
    std::size_t column = 0;
};

/// One problem found in a file; `text` names the offending sequence, type or name.
struct problem {
    mark where;
    std::string text;
};

/// A name the application (or a built-in) must provide, and where the file uses it.
struct name_use {
    std::string name;
    mark where;
};

struct message_entry {
    mark where;  ///< the message's map
    std::string type;
    std::string subtype;
    std::optional<name_use> context_id;
    std::optional<name_use> filter;
    condition release;
    std::string topic;
    std::string cluster;
    /// missingContextId; empty when the file does not set it (load_options then decides).
    std::optional<missing_context_id_policy> missing_context_id;
    /// sequenceNumber: the extractor whose text is the message's number (numbered sequences).
    std::optional<name_use> sequence_number;
};

struct sequence_entry {
    mark where;  ///< the sequence's map
    std::string name;
    std::chrono::seconds retention{0};
    std::string retention_text;  ///< as written, for summaries
    std::optional<timestamp> recording_until;  ///< recordingUntil: recording mode before it
    std::string recording_text;                ///< as written, for summaries
    std::optional<std::chrono::seconds> deduplication_window;  ///< deduplicationWindow; empty: the retention
    std::string deduplication_window_text;                     ///< as written, for summaries
    buffer_limit buffer;  ///< maxWaiting (empty: the default) and overflowPolicy
    numbering_rules numbering;    ///< firstNumber, gapTimeout and gapPolicy (numbered sequences)
    std::string gap_timeout_text;  ///< as written, for summaries
    std::vector<message_entry> messages;
};

struct resolver_entry {
    std::string type;
    name_use resolver;
};

/// A parsed file. Entries of the wrong node kind are left out (and reported), so the indices of
/// `sequences`/`messages` are those of the declarations built from it.
struct document {
    std::string file;
    std::vector<sequence_entry> sequences;
    std::vector<resolver_entry> resolvers;
    std::vector<problem> problems;  ///< syntax, structure and value problems, in file order
};

/// Largest accepted file: declarations are small, and a limit keeps a stray file from stalling start-up.
inline constexpr std::size_t max_file_size = 1024 * 1024;
/// Deepest accepted nesting of YAML collections (release conditions included).
inline constexpr std::size_t max_depth = 64;

/// Parses `text`; `file` names it in problems. Never throws for bad input: problems are recorded.
document parse_string(std::string_view text, std::string file);

/// Reads and parses a file. Throws seqinbox::error (configuration) only when it cannot be read;
/// a file larger than max_file_size is a recorded problem.
document parse_file(const std::filesystem::path& path);

/// The spelling of a missing context id policy in files: `handle` or `dead-letter`.
std::string_view policy_name(missing_context_id_policy policy);

/// `file:line:col: text`.
std::string format(const std::string& file, const problem& p);

/// Attaches the position of the node each validation problem is about: its message, else its
/// sequence, else the resolver it names, else the top of the file.
std::vector<problem> locate(const document& doc, const std::vector<declaration_problem>& problems);

}  // namespace seqinbox::yaml
