// Parses the declaration format with yaml-cpp into seqinbox::yaml::document. Every problem is
// recorded with its position and parsing goes on, so that one run reports all of them.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include "seqinbox/error.hpp"
#include "seqinbox/yaml/builtin.hpp"
#include "seqinbox/yaml/document.hpp"
#include "seqinbox/yaml/instant.hpp"
#include "seqinbox/yaml/retention.hpp"

namespace seqinbox::yaml {

namespace {

using keys = std::span<const std::string_view>;
constexpr std::array<std::string_view, 2> top_keys{"sequences", "subTypeResolvers"};
constexpr std::array<std::string_view, 10> sequence_keys{
    "name",       "retentionPeriod", "messages",    "recordingUntil", "deduplicationWindow",
    "maxWaiting", "overflowPolicy",  "firstNumber", "gapTimeout",     "gapPolicy"};
constexpr std::array<std::string_view, 9> message_keys{
    "type",  "subType",     "contextIdExtractor", "messageFilter", "releaseCondition",
    "topic", "clusterName", "missingContextId",   "sequenceNumber"};
constexpr std::array policies{missing_context_id_policy::handle, missing_context_id_policy::dead_letter};
constexpr std::array<std::string_view, 3> condition_keys{"predecessor", "and", "or"};

// Maps visited, aliases counted: bounds the work a small file with many aliases can cause.
constexpr std::size_t max_nodes = 100000;

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

std::string_view nearest(std::string_view key, keys valid) {
    return *std::ranges::min_element(valid, {}, [&](std::string_view v) { return edit_distance(key, v); });
}

std::string key_list(keys valid) {
    std::string text;
    for (auto k : valid) text += (text.empty() ? "" : ", ") + std::string(k);
    return text;
}

std::string_view kind_name(const YAML::Node& n) {
    switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Null: return "empty";
    default: return "undefined";
    }
}

mark mark_of(const YAML::Node& n) {
    const auto m = n.Mark();
    if (m.is_null()) return {};
    return {static_cast<std::size_t>(m.line) + 1, static_cast<std::size_t>(m.column) + 1};
}

struct too_large {};  // stops parsing once max_nodes is exceeded

class parser {
public:
    explicit parser(document& doc) : doc_(doc) {}

    void root(const YAML::Node& root) {
        if (root.IsNull()) {
            add({1, 1}, "the file declares nothing; expected a map with 'sequences' (and optionally 'subTypeResolvers')");
            return;
        }
        if (!is(root, YAML::NodeType::Map, "the top level")) return;
        const auto fields = map_fields(root, top_keys, "the top level");
        if (const auto* seqs = find(fields, "sequences")) {
            if (seqs->second.IsNull() || (seqs->second.IsSequence() && seqs->second.size() == 0))
                add(mark_of(seqs->first), "'sequences' is empty; declare at least one sequence");
            else if (is(seqs->second, YAML::NodeType::Sequence, "'sequences'"))
                for (std::size_t i = 0; i < seqs->second.size(); ++i) sequence(seqs->second[i], i);
        } else {
            add(mark_of(root), "no 'sequences' list at the top level");
        }
        if (const auto* resolvers = find(fields, "subTypeResolvers")) subtype_resolvers(resolvers->second);
    }

private:
    using field_list = std::vector<std::pair<YAML::Node, YAML::Node>>;  // key node, value node

    void add(mark where, std::string text) { doc_.problems.push_back({where, std::move(text)}); }

    bool is(const YAML::Node& n, YAML::NodeType::value kind, const std::string& what) {
        if (n.Type() == kind) return true;
        const std::string_view expected = kind == YAML::NodeType::Map        ? "a map"
                                          : kind == YAML::NodeType::Sequence ? "a list"
                                                                              : "a scalar";
        add(mark_of(n), what + " must be " + std::string(expected) + ", not " + std::string(kind_name(n)));
        return false;
    }

    /// The known fields of a map; unknown, duplicate and non-scalar keys are reported.
    field_list map_fields(const YAML::Node& map, keys valid, const std::string& where) {
        if (++visited_ > max_nodes) throw too_large{};
        field_list fields;
        for (auto it = map.begin(); it != map.end(); ++it) {
            const YAML::Node key = it->first;
            if (!key.IsScalar()) {
                add(mark_of(key), where + ": a key must be a plain name, not " + std::string(kind_name(key)));
                continue;
            }
            const auto& name = key.Scalar();
            if (std::ranges::find(valid, name) == valid.end()) {
                add(mark_of(key), where + ": unknown key " + quote(name) + " (did you mean " + quote(nearest(name, valid)) +
                                      "? valid keys: " + key_list(valid) + ")");
            } else if (find(fields, name)) {
                add(mark_of(key), where + ": key " + quote(name) + " is given twice");
            } else {
                fields.emplace_back(key, it->second);
            }
        }
        return fields;
    }

    static const std::pair<YAML::Node, YAML::Node>* find(const field_list& fields, std::string_view name) {
        auto it = std::ranges::find_if(fields, [&](const auto& f) { return f.first.Scalar() == name; });
        return it == fields.end() ? nullptr : &*it;
    }

    /// The text of scalar field `name` (empty when absent or null; reported when not a scalar).
    std::string text(const field_list& fields, std::string_view name, const std::string& where) {
        const auto* f = find(fields, name);
        if (!f || f->second.IsNull()) return {};
        if (!is(f->second, YAML::NodeType::Scalar, where + ": " + quote(name))) return {};
        return f->second.Scalar();
    }

    std::optional<name_use> name(const field_list& fields, std::string_view key, const std::string& where) {
        auto value = text(fields, key, where);
        if (value.empty()) return std::nullopt;
        return name_use{std::move(value), mark_of(find(fields, key)->second)};
    }

    /// The scalar under `key` of a map, read before its keys are checked, to label problems.
    static std::string peek(const YAML::Node& map, const char* key) {
        const YAML::Node value = map[key];
        return value.IsDefined() && value.IsScalar() ? value.Scalar() : std::string();
    }

    void sequence(const YAML::Node& node, std::size_t index) {
        std::string where = "sequences[" + std::to_string(index) + "]";
        if (!is(node, YAML::NodeType::Map, where)) return;
        if (const auto name = peek(node, "name"); !name.empty()) where = "sequence " + quote(name);
        const auto fields = map_fields(node, sequence_keys, where);
        sequence_entry seq;
        seq.where = mark_of(node);
        seq.name = text(fields, "name", where);
        retention(fields, where, seq);
        deduplication_window(fields, where, seq);
        recording(fields, where, seq);
        buffer(fields, where, seq);
        numbering(fields, where, seq);
        if (const auto* messages = find(fields, "messages"); messages && !messages->second.IsNull()) {
            if (is(messages->second, YAML::NodeType::Sequence, where + ": 'messages'"))
                for (std::size_t i = 0; i < messages->second.size(); ++i) message(messages->second[i], where, i, seq);
        }
        doc_.sequences.push_back(std::move(seq));
    }

    // A reported retention problem leaves a placeholder period, so validation does not report it again.
    void retention(const field_list& fields, const std::string& where, sequence_entry& seq) {
        seq.retention = std::chrono::seconds(1);
        const auto* f = find(fields, "retentionPeriod");
        if (!f || f->second.IsNull()) {
            add(seq.where, where + ": no 'retentionPeriod' (e.g. 24h, 7d, P7D)");
            return;
        }
        if (!is(f->second, YAML::NodeType::Scalar, where + ": 'retentionPeriod'")) return;
        seq.retention_text = f->second.Scalar();
        auto parsed = parse_retention(seq.retention_text);
        if (auto* why = std::get_if<std::string>(&parsed)) add(mark_of(f->second), where + ": " + *why);
        else seq.retention = std::get<std::chrono::seconds>(parsed);
    }

    void deduplication_window(const field_list& fields, const std::string& where, sequence_entry& seq) {
        seq.deduplication_window_text = text(fields, "deduplicationWindow", where);
        if (seq.deduplication_window_text.empty()) return;
        auto parsed = parse_deduplication_window(seq.deduplication_window_text);
        if (auto* why = std::get_if<std::string>(&parsed)) add(mark_of(find(fields, "deduplicationWindow")->second), where + ": " + *why);
        else seq.deduplication_window = std::get<std::chrono::seconds>(parsed);
    }

    void recording(const field_list& fields, const std::string& where, sequence_entry& seq) {
        seq.recording_text = text(fields, "recordingUntil", where);
        if (seq.recording_text.empty()) return;
        auto parsed = parse_instant(seq.recording_text);
        if (auto* why = std::get_if<std::string>(&parsed))
            add(mark_of(find(fields, "recordingUntil")->second), where + ": 'recordingUntil' " + *why);
        else
            seq.recording_until = std::get<timestamp>(parsed);
    }

    void buffer(const field_list& fields, const std::string& where, sequence_entry& seq) {
        if (const auto limit_text = text(fields, "maxWaiting", where); !limit_text.empty()) {
            if (const auto limit = whole_number(limit_text); limit && *limit >= 1 && *limit <= most_max_waiting)
                seq.buffer.max_waiting = *limit;
            else
                add(mark_of(find(fields, "maxWaiting")->second), where + ": 'maxWaiting' must be a whole number from 1 to " +
                                                                     std::to_string(most_max_waiting) + ", got " + quote(limit_text));
        }
        const auto policy = text(fields, "overflowPolicy", where);
        if (policy.empty()) return;
        if (const auto known = parse_overflow_policy(policy)) seq.buffer.on_overflow = *known;
        else
            add(mark_of(find(fields, "overflowPolicy")->second),
                where + ": unknown overflowPolicy " + quote(policy) + "; expected dead-letter-newest, dead-letter-instance or reject");
    }

    void numbering(const field_list& fields, const std::string& where, sequence_entry& seq) {
        if (const auto first = text(fields, "firstNumber", where); first == "first-seen") {
            seq.numbering.first_number = std::nullopt;
        } else if (!first.empty()) {
            if (const auto n = parse_sequence_number(first)) seq.numbering.first_number = *n;
            else add(mark_of(find(fields, "firstNumber")->second),
                     where + ": 'firstNumber' must be a whole number from 0 to " +
                         std::to_string(std::numeric_limits<std::int64_t>::max()) + " or first-seen, got " + quote(first));
        }
        bool timeout_refused = false;
        seq.gap_timeout_text = text(fields, "gapTimeout", where);
        if (!seq.gap_timeout_text.empty()) {
            auto parsed = parse_gap_timeout(seq.gap_timeout_text);
            timeout_refused = std::holds_alternative<std::string>(parsed);
            if (timeout_refused) add(mark_of(find(fields, "gapTimeout")->second), where + ": " + std::get<std::string>(parsed));
            else seq.numbering.gap_timeout = std::get<std::chrono::seconds>(parsed);
        }
        const auto policy = text(fields, "gapPolicy", where);
        if (policy.empty()) return;
        const auto known = parse_gap_policy(policy);
        if (!known)
            add(mark_of(find(fields, "gapPolicy")->second),
                where + ": unknown gapPolicy " + quote(policy) + "; expected hold, skip or dead-letter");
        // Kept at hold after a refused timeout, so that validation does not add "never applies".
        else if (!timeout_refused) seq.numbering.on_gap = *known;
    }

    /// Digits only (no sign, space or exponent) that fit a size_t: anything else is not a count.
    static std::optional<std::size_t> whole_number(std::string_view text) {
        std::size_t n = 0;
        const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (failure != std::errc{} || end != text.data() + text.size()) return std::nullopt;
        return n;
    }

    void message(const YAML::Node& node, const std::string& sequence_where, std::size_t index, sequence_entry& seq) {
        std::string where = sequence_where + ": messages[" + std::to_string(index) + "]";
        if (!is(node, YAML::NodeType::Map, where)) return;
        if (const auto type = peek(node, "type"); !type.empty())
            where = sequence_where + ": type " + quote(qualify(type, peek(node, "subType")));
        const auto fields = map_fields(node, message_keys, where);
        message_entry msg;
        msg.where = mark_of(node);
        msg.type = text(fields, "type", where);
        msg.subtype = text(fields, "subType", where);
        msg.context_id = name(fields, "contextIdExtractor", where);
        msg.filter = name(fields, "messageFilter", where);
        msg.topic = text(fields, "topic", where);
        msg.cluster = text(fields, "clusterName", where);
        msg.missing_context_id = missing_context_id(fields, where);
        msg.sequence_number = name(fields, "sequenceNumber", where);
        if (const auto* release = find(fields, "releaseCondition"); release && !release->second.IsNull())
            msg.release = condition_node(release->second, where, 1);
        seq.messages.push_back(std::move(msg));
    }

    std::optional<missing_context_id_policy> missing_context_id(const field_list& fields, const std::string& where) {
        const auto value = text(fields, "missingContextId", where);
        if (value.empty()) return std::nullopt;
        const auto known = std::ranges::find(policies, value, policy_name);
        if (known != policies.end()) return *known;
        add(mark_of(find(fields, "missingContextId")->second),
            where + ": unknown missingContextId " + quote(value) + "; expected handle or dead-letter");
        return std::nullopt;
    }

    // A malformed node becomes `always`: it is reported here, and the rest of the tree keeps its shape.
    condition condition_node(const YAML::Node& node, const std::string& where, std::size_t depth) {
        if (depth > max_depth) {
            add(mark_of(node), where + ": release condition is nested deeper than " + std::to_string(max_depth) + " levels");
            return {};
        }
        if (!is(node, YAML::NodeType::Map, where + ": a release condition node")) return {};
        const auto fields = map_fields(node, condition_keys, where + ": release condition");
        if (fields.empty()) {
            if (node.size() == 0)
                add(mark_of(node), where + ": empty release condition node; give 'predecessor', 'and' or 'or'");
            return {};
        }
        if (fields.size() > 1) {
            // Which one was meant is unknowable; a node is exactly one of the three.
            std::string both = find(fields, "predecessor") ? "'predecessor' and " : "";
            both += find(fields, "and") ? "'and'" : "";
            both += find(fields, "and") && find(fields, "or") ? " and " : "";
            both += find(fields, "or") ? "'or'" : "";
            add(mark_of(node), where + ": a release condition node has both " + both +
                                   "; a node is one of them (nest the others in an 'and' or 'or' list)");
            return {};
        }
        const auto& [key, value] = fields.front();
        if (key.Scalar() == "predecessor") {
            if (value.IsNull()) {
                add(mark_of(key), where + ": 'predecessor' names no type");
                return {};
            }
            if (!is(value, YAML::NodeType::Scalar, where + ": 'predecessor'")) return {};
            return after(value.Scalar());
        }
        std::vector<condition> children;
        if (!value.IsNull() && !is(value, YAML::NodeType::Sequence, where + ": " + quote(key.Scalar()))) return {};
        for (std::size_t i = 0; i < value.size(); ++i) children.push_back(condition_node(value[i], where, depth + 1));
        return key.Scalar() == "and" ? all_of(std::move(children)) : any_of(std::move(children));
    }

    void subtype_resolvers(const YAML::Node& node) {
        if (node.IsNull() || !is(node, YAML::NodeType::Map, "'subTypeResolvers'")) return;
        if (++visited_ > max_nodes) throw too_large{};
        std::set<std::string> seen;
        for (auto it = node.begin(); it != node.end(); ++it) {
            const YAML::Node key = it->first;
            const YAML::Node value = it->second;
            if (!is(key, YAML::NodeType::Scalar, "'subTypeResolvers': a key (a message type)")) continue;
            const std::string where = "'subTypeResolvers': type " + quote(key.Scalar());
            if (!seen.insert(key.Scalar()).second) {
                add(mark_of(key), where + " is given twice");
                continue;
            }
            if (value.IsNull()) {
                add(mark_of(key), where + ": no resolver name");
                continue;
            }
            if (!is(value, YAML::NodeType::Scalar, where)) continue;
            doc_.resolvers.push_back({key.Scalar(), {value.Scalar(), mark_of(value)}});
        }
    }

    document& doc_;
    std::size_t visited_ = 0;
};

/// Position of the first byte that is not valid UTF-8, if any.
std::optional<std::size_t> invalid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t length = 0;
        std::uint32_t cp = 0, min = 0;
        if (c < 0x80) length = 1, cp = c;
        else if ((c & 0xE0) == 0xC0) length = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) length = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) length = 4, cp = c & 0x07, min = 0x10000;
        else return i;
        if (text.size() - i < length) return i;
        for (std::size_t k = 1; k < length; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += length;
    }
    return std::nullopt;
}

mark position(std::string_view text, std::size_t offset) {
    mark m{1, 1};
    for (std::size_t i = 0; i < offset; ++i) {
        if (text[i] == '\n') m = {m.line + 1, 1};
        else ++m.column;
    }
    return m;
}

/// Where flow collections (`[`, `{`) nest deeper than max_depth, found before yaml-cpp recurses.
/// Quotes and comments are skipped; block nesting is bounded by yaml-cpp's own depth guard.
std::optional<std::size_t> too_deep(std::string_view text) {
    std::size_t depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        // Comments and quotes start only after a separator; an apostrophe inside a word is text.
        const bool after_separator = i == 0 || std::string_view(" \t\n[{,:").find(text[i - 1]) != std::string_view::npos;
        if (c == '#' && after_separator) {
            while (i < text.size() && text[i] != '\n') ++i;
        } else if ((c == '"' || c == '\'') && after_separator) {
            for (++i; i < text.size() && text[i] != c; ++i)
                if (c == '"' && text[i] == '\\') ++i;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return i;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return std::nullopt;
}

/// Ignores every parse event: used only to count documents.
class no_events : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

/// 0, 1 or 2 (two or more). Not YAML::LoadAll: yaml-cpp 0.7 never consumes a stray ',' after
/// the first document and LoadAll then yields empty documents forever (found by fuzzing).
int count_documents(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    no_events events;
    int documents = 0;
    while (documents < 2 && parser.HandleNextDocument(events)) ++documents;
    return documents;
}

document oversized(std::string file, std::size_t size) {
    document doc;
    doc.file = std::move(file);
    doc.problems.push_back({{1, 1}, "the file has " + std::to_string(size) + " bytes; declaration files are limited to " +
                                        std::to_string(max_file_size) + " bytes"});
    return doc;
}

}  // namespace

document parse_string(std::string_view text, std::string file) {
    if (text.size() > max_file_size) return oversized(std::move(file), text.size());
    document doc;
    doc.file = std::move(file);
    if (auto bad = invalid_utf8(text)) {
        doc.problems.push_back({position(text, *bad), "the file is not valid UTF-8 (byte offset " + std::to_string(*bad) +
                                                          "); save it as UTF-8"});
        return doc;
    }
    if (auto deep = too_deep(text)) {
        doc.problems.push_back({position(text, *deep), "nesting is deeper than " + std::to_string(max_depth) + " levels"});
        return doc;
    }
    YAML::Node root;
    try {
        const std::string copy(text);  // yaml-cpp reads from a stream
        if (auto documents = count_documents(copy); documents > 1) {
            doc.problems.push_back({{1, 1}, "the file holds more than one YAML document (or text after the first, "
                                            "e.g. a stray ','); put all declarations in one"});
            return doc;
        }
        root = YAML::Load(copy);
    } catch (const YAML::DeepRecursion& e) {
        doc.problems.push_back({{static_cast<std::size_t>(e.mark.line) + 1, static_cast<std::size_t>(e.mark.column) + 1},
                                "nesting is too deep for the YAML parser (" + std::to_string(e.depth()) + " levels)"});
        return doc;
    } catch (const YAML::ParserException& e) {
        doc.problems.push_back({{static_cast<std::size_t>(e.mark.line) + 1, static_cast<std::size_t>(e.mark.column) + 1},
                                "YAML syntax error: " + e.msg});
        return doc;
    }
    try {
        parser(doc).root(root);
    } catch (const too_large&) {
        doc.problems.push_back({{1, 1}, "the declarations are too large (more than " + std::to_string(max_nodes) +
                                            " maps, aliases counted)"});
    }
    std::ranges::stable_sort(doc.problems, {}, [](const problem& p) { return std::pair(p.where.line, p.where.column); });
    return doc;
}

document parse_file(const std::filesystem::path& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw error(error_category::configuration, "cannot read " + path.string() + ": " + ec.message());
    if (size > max_file_size) return oversized(path.string(), size);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error(error_category::configuration, "cannot read " + path.string());
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) throw error(error_category::configuration, "cannot read " + path.string());
    return parse_string(text, path.string());
}

std::string_view policy_name(missing_context_id_policy policy) {
    return policy == missing_context_id_policy::dead_letter ? "dead-letter" : "handle";
}

std::string format(const std::string& file, const problem& p) {
    if (p.where.line == 0) return file + ": " + p.text;
    return file + ":" + std::to_string(p.where.line) + ":" + std::to_string(p.where.column) + ": " + p.text;
}

std::vector<problem> locate(const document& doc, const std::vector<declaration_problem>& problems) {
    std::vector<problem> located;
    for (const auto& p : problems) {
        mark where{1, 1};
        if (p.sequence < doc.sequences.size()) {
            const auto& seq = doc.sequences[p.sequence];
            where = p.message_index < seq.messages.size() ? seq.messages[p.message_index].where : seq.where;
        } else {
            // Resolver problems carry no index; their text names the type (see detail::check_resolvers).
            for (const auto& r : doc.resolvers)
                if (p.message.starts_with("subtype resolver for type " + quote(r.type))) where = r.resolver.where;
        }
        located.push_back({where, p.message});
    }
    return located;
}

}  // namespace seqinbox::yaml
