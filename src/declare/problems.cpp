// Start-up validation of declarations (see seqinbox/declare/problems.hpp): the checks on the
// type-erased shape, compiled once.
#include "seqinbox/declare/problems.hpp"

#include <algorithm>
#include <iterator>
#include <set>
#include <string_view>

#include "seqinbox/declare/buffer_limit.hpp"
#include "seqinbox/declare/max_retention.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::detail {

namespace {

// ---- text helpers ----

// Appends rather than `"'" + std::string(s)`, which GCC 12 at -O3 flags with a false -Wrestrict.
std::string quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.append(1, '\'').append(s).append(1, '\'');
    return out;
}

}  // namespace

std::string quoted_list(const std::vector<std::string>& names) {
    if (names.empty()) return "none";
    std::string text;
    for (const auto& n : names) text += (text.empty() ? "" : ", ") + quote(n);
    return text;
}

namespace {

std::string source_name(const message_shape& m) {
    std::string text = m.topic.empty() ? std::string("the default topic") : "topic " + quote(m.topic);
    if (!m.cluster.empty()) text += " of cluster " + quote(m.cluster);
    return text;
}

void push_unique(std::vector<std::string>& names, const std::string& name) {
    if (std::ranges::find(names, name) == names.end()) names.push_back(name);
}

// ---- collecting problems ----

struct message_ref {
    std::size_t sequence;
    std::size_t message;
};

/// Collects problems and phrases their common prefixes ("sequence 'S': type 'T': ...").
class problem_list {
public:
    explicit problem_list(const declarations_shape& shape) : shape_(shape) {}

    const declarations_shape& shape() const noexcept { return shape_; }
    const message_shape& at(message_ref r) const { return shape_.sequences[r.sequence].messages[r.message]; }

    std::string sequence_label(std::size_t s) const {
        const auto& name = shape_.sequences[s].name;
        return name.empty() ? "sequences[" + std::to_string(s) + "] (unnamed)" : "sequence " + quote(name);
    }
    std::string message_label(message_ref r) const {
        const auto& m = at(r);
        return m.type.empty() ? "messages[" + std::to_string(r.message) + "] (no type)"
                              : "type " + quote(m.qualified_type());
    }
    /// Where a declaration is, for messages that mention a second one.
    std::string place(message_ref r) const {
        return sequence_label(r.sequence) + " messages[" + std::to_string(r.message) + "]";
    }

    void add(std::string message, std::size_t sequence = declaration_problem::npos,
             std::size_t message_index = declaration_problem::npos) {
        problems_.push_back({std::move(message), sequence, message_index});
    }
    void add_for_sequence(std::size_t s, const std::string& text) { add(sequence_label(s) + ": " + text, s); }
    void add_for_message(message_ref r, const std::string& text) {
        add(sequence_label(r.sequence) + ": " + message_label(r) + ": " + text, r.sequence, r.message);
    }

    std::vector<declaration_problem> take() { return std::move(problems_); }

private:
    const declarations_shape& shape_;
    std::vector<declaration_problem> problems_;
};

/// Every declaration of one message type (all subtypes), in declaration order.
struct type_usage {
    std::vector<message_ref> without_subtype;
    std::vector<message_ref> with_subtype;
    message_ref first;
};

/// Indexes shared by several checks.
struct declaration_index {
    std::vector<std::string> type_order;          ///< message types by first declaration
    std::map<std::string, type_usage> types;      ///< by message type
    std::map<std::string, message_ref> qualified;  ///< first declaration of each qualified type

    explicit declaration_index(const declarations_shape& shape) {
        for (std::size_t s = 0; s < shape.sequences.size(); ++s) {
            const auto& messages = shape.sequences[s].messages;
            for (std::size_t m = 0; m < messages.size(); ++m) {
                const auto& msg = messages[m];
                if (msg.type.empty()) continue;  // reported on its own, unusable for the rest
                const message_ref ref{s, m};
                qualified.emplace(msg.qualified_type(), ref);
                auto [it, inserted] = types.try_emplace(msg.type, type_usage{{}, {}, ref});
                if (inserted) type_order.push_back(msg.type);
                (msg.subtype.empty() ? it->second.without_subtype : it->second.with_subtype).push_back(ref);
            }
        }
    }
};

// ---- per sequence: names, retention, deduplication window, messages ----

void check_sequence_basics(problem_list& out) {
    const auto& sequences = out.shape().sequences;
    std::map<std::string, std::size_t> first_by_name;
    for (std::size_t s = 0; s < sequences.size(); ++s) {
        const auto& seq = sequences[s];
        if (seq.name.empty()) {
            out.add("sequences[" + std::to_string(s) + "] has no name", s);
        } else if (auto [it, inserted] = first_by_name.emplace(seq.name, s); !inserted) {
            // Instances are keyed by (sequence name, context id): two sequences must not share it.
            out.add_for_sequence(s, "sequence name already used by sequences[" + std::to_string(it->second) + "]");
        }
        if (seq.retention <= std::chrono::seconds::zero())
            out.add_for_sequence(s, "retention period must be positive, got " + std::to_string(seq.retention.count()) + "s");
        if (seq.retention > max_retention)
            out.add_for_sequence(s, "retention period is longer than ten years (the most), got " + std::to_string(seq.retention.count()) + "s");
        if (seq.deduplication_window && *seq.deduplication_window < std::chrono::seconds::zero())
            out.add_for_sequence(s, "deduplication window must not be negative, got " + std::to_string(seq.deduplication_window->count()) + "s");
        if (seq.deduplication_window && *seq.deduplication_window > max_retention)
            out.add_for_sequence(s, "deduplication window is longer than ten years (the most), got " +
                                        std::to_string(seq.deduplication_window->count()) + "s");
        if (seq.max_waiting && (*seq.max_waiting == 0 || *seq.max_waiting > most_max_waiting))
            out.add_for_sequence(s, "maxWaiting must be between 1 and " + std::to_string(most_max_waiting) + ", got " +
                                        std::to_string(*seq.max_waiting));
        if (seq.messages.empty()) out.add_for_sequence(s, "declares no message types");
        for (std::size_t m = 0; m < seq.messages.size(); ++m) {
            const auto& msg = seq.messages[m];
            if (msg.type.empty()) out.add(out.sequence_label(s) + ": messages[" + std::to_string(m) + "] has no type", s, m);
            if (!msg.has_context_id) out.add_for_message({s, m}, "no context id extractor");
        }
    }
}

// ---- per sequence: numbering (numbering.hpp) ----

std::string seconds_text(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

/// The numbering settings that differ from the defaults, e.g. "first number 5, gap policy 'skip'".
std::string changed_settings(const numbering_rules& rules) {
    const numbering_rules defaults;
    std::string text;
    const auto add = [&](const std::string& setting) { text += (text.empty() ? "" : ", ") + setting; };
    if (rules.first_number != defaults.first_number)
        add("first number " + (rules.first_number ? std::to_string(*rules.first_number) : std::string("first seen")));
    if (rules.gap_timeout) add("gap timeout " + seconds_text(*rules.gap_timeout));
    if (rules.on_gap != defaults.on_gap) add("gap policy " + quote(to_string(rules.on_gap)));
    return text;
}

void check_numbering_values(problem_list& out, std::size_t s) {
    const auto& rules = out.shape().sequences[s].numbering;
    if (rules.first_number && *rules.first_number < 0)
        out.add_for_sequence(s, "first number must not be negative, got " + std::to_string(*rules.first_number));
    if (rules.gap_timeout && *rules.gap_timeout <= std::chrono::seconds::zero())
        out.add_for_sequence(s, "gap timeout must be positive, got " + seconds_text(*rules.gap_timeout));
    if (rules.gap_timeout && *rules.gap_timeout > max_retention)
        out.add_for_sequence(s, "gap timeout is longer than ten years (the most), got " + seconds_text(*rules.gap_timeout));
    if (!rules.gap_timeout && rules.on_gap != gap_policy::hold)
        out.add_for_sequence(s, "gap policy " + quote(to_string(rules.on_gap)) +
                                    " never applies without a gap timeout; set a gap timeout or keep the policy 'hold'");
}

/// Every type of a sequence declares a number or none does (the first decides, see
/// sequence_declaration::numbered); a numbered type has no release condition; numbering settings
/// on a sequence without numbers mean a forgotten sequence number.
void check_numbered_types(problem_list& out, std::size_t s) {
    const auto& seq = out.shape().sequences[s];
    if (seq.messages.empty()) return;  // reported already
    std::vector<std::string> with, without;
    std::optional<std::size_t> first_deviation;
    for (std::size_t m = 0; m < seq.messages.size(); ++m) {
        const auto& msg = seq.messages[m];
        if (msg.has_sequence_number != seq.messages.front().has_sequence_number && !first_deviation) first_deviation = m;
        if (msg.type.empty()) continue;  // reported already
        (msg.has_sequence_number ? with : without).push_back(msg.qualified_type());
        if (msg.has_sequence_number && !msg.release.is_always())
            out.add_for_message({s, m}, "declares a release condition (" + describe(msg.release) +
                                            ") and a sequence number; in a numbered sequence the numbers decide the order");
    }
    if (first_deviation && !with.empty() && !without.empty())
        out.add(out.sequence_label(s) + ": a sequence number is declared by " + quoted_list(with) + " but not by " +
                    quoted_list(without) + "; declare one on every type of the sequence or on none",
                s, *first_deviation);
    if (const auto changed = changed_settings(seq.numbering); with.empty() && !changed.empty())
        out.add_for_sequence(s, "numbering is set (" + changed + ") but no type declares a sequence number; "
                                "declare one on every type, or leave the numbering at its defaults");
}

// ---- per message: the release condition's structure and predecessors ----

/// Structural problems of each node (empty, single child, duplicate direct predecessors), and
/// every predecessor name in order of first appearance.
void check_condition_nodes(const condition& node, problem_list& out, message_ref where,
                                  std::vector<std::string>& predecessors) {
    if (node.node_kind() == condition::kind::predecessor) {
        if (node.predecessor().empty()) out.add_for_message(where, "release condition has a predecessor naming no type");
        else push_unique(predecessors, node.predecessor());
        return;
    }
    if (node.is_always()) return;
    const auto& children = node.children();
    const std::string kind(to_string(node.node_kind()));
    if (children.empty()) out.add_for_message(where, "release condition has an empty " + kind + " node");
    if (children.size() == 1)
        out.add_for_message(where, "release condition has an " + kind + " with a single child (" +
                                       describe(children.front()) + "); use the child alone");
    std::vector<std::string> seen, reported;
    for (const auto& child : children) {
        if (child.node_kind() != condition::kind::predecessor) continue;
        const auto& name = child.predecessor();
        if (std::ranges::find(seen, name) == seen.end()) {
            seen.push_back(name);
        } else if (std::ranges::find(reported, name) == reported.end()) {
            reported.push_back(name);
            out.add_for_message(where, "predecessor " + quote(name) + " is listed more than once in one " + kind);
        }
    }
    for (const auto& child : children) check_condition_nodes(child, out, where, predecessors);
}

/// Why `name` is not a predecessor this sequence can use, with a hint towards the fix.
std::string undeclared_hint(const problem_list& out, const declaration_index& index, std::size_t s,
                                   const std::string& name) {
    if (auto it = index.qualified.find(name); it != index.qualified.end() && it->second.sequence != s)
        return " (it belongs to " + out.sequence_label(it->second.sequence) +
               "; predecessors must be declared in the same sequence)";
    if (auto it = index.types.find(name); it != index.types.end()) {
        std::vector<std::string> here;
        for (const auto& r : it->second.with_subtype)
            if (r.sequence == s) here.push_back(out.at(r).qualified_type());
        if (!here.empty()) return " (did you mean one of " + quoted_list(here) + "?)";
    }
    return {};
}

void check_conditions(problem_list& out, const declaration_index& index) {
    const auto& sequences = out.shape().sequences;
    for (std::size_t s = 0; s < sequences.size(); ++s) {
        const auto& messages = sequences[s].messages;
        const auto declared_here = [&](const std::string& name) {
            return std::ranges::any_of(messages, [&](const message_shape& m) { return !m.type.empty() && m.qualified_type() == name; });
        };
        for (std::size_t m = 0; m < messages.size(); ++m) {
            const message_ref where{s, m};
            std::vector<std::string> predecessors;
            check_condition_nodes(messages[m].release, out, where, predecessors);
            for (const auto& name : predecessors) {
                if (!messages[m].type.empty() && name == messages[m].qualified_type())
                    out.add_for_message(where, "names itself as predecessor");
                else if (!declared_here(name))
                    out.add_for_message(where, "predecessor " + quote(name) + " is not declared in this sequence" +
                                                   undeclared_hint(out, index, s, name));
            }
        }
    }
}

// ---- per sequence: types that can never be released ----

/// Predecessor names that keep `c` from holding, given what is processed (empty when `c` holds,
/// or when only an empty any_of blocks it).
template <class IsProcessed>
void collect_blockers(const condition& c, const IsProcessed& is_processed, std::vector<std::string>& out) {
    if (c.satisfied(is_processed)) return;
    if (c.node_kind() == condition::kind::predecessor) push_unique(out, c.predecessor());
    for (const auto& child : c.children()) collect_blockers(child, is_processed, out);
}

/// The release fixpoint, then one report per distinct root cause: a cycle of
/// unreleasable types, or a type already reported for a defect (self-predecessor, undeclared
/// predecessor, empty any_of), which itself is not reported again.
void check_releasability(problem_list& out, std::size_t s) {
    const auto& messages = out.shape().sequences[s].messages;

    // Nodes: first declaration of each qualified type (duplicates are reported elsewhere).
    std::vector<std::size_t> node_message;
    std::vector<std::string> node_name;
    std::map<std::string, std::size_t> node_of;
    for (std::size_t m = 0; m < messages.size(); ++m) {
        if (messages[m].type.empty()) continue;
        if (node_of.emplace(messages[m].qualified_type(), node_message.size()).second) {
            node_message.push_back(m);
            node_name.push_back(messages[m].qualified_type());
        }
    }
    const std::size_t n = node_message.size();

    std::vector<bool> releasable(n, false);
    for (const auto m : release_order(messages)) releasable[node_of.at(messages[m].qualified_type())] = true;
    const auto is_processed = [&](const std::string& name) {
        auto it = node_of.find(name);
        return it != node_of.end() && releasable[it->second];
    };

    // Each unreleasable node waits for one chosen unreleasable node (not itself), or for none:
    // then it is a defect, and `defect` says why.
    std::vector<std::optional<std::size_t>> next(n);
    std::vector<std::string> defect(n);
    for (std::size_t v = 0; v < n; ++v) {
        if (releasable[v]) continue;
        std::vector<std::string> blockers;
        collect_blockers(messages[node_message[v]].release, is_processed, blockers);
        auto declared = std::ranges::find_if(blockers, [&](const std::string& b) { return b != node_name[v] && node_of.count(b); });
        if (declared != blockers.end()) next[v] = node_of.at(*declared);
        else if (std::ranges::find(blockers, node_name[v]) != blockers.end()) defect[v] = "names itself as predecessor";
        else if (!blockers.empty()) defect[v] = "waits for " + quote(blockers.front()) + ", which is not declared in this sequence";
        else defect[v] = "has an empty any_of in its release condition";
    }

    // Following `next` ends in a defect or a cycle; its root is the defect, or the cycle's
    // earliest declared node.
    std::vector<std::optional<std::size_t>> root(n);
    for (std::size_t u = 0; u < n; ++u) {
        if (releasable[u] || root[u]) continue;
        std::vector<std::size_t> path;
        std::size_t v = u;
        std::size_t r = 0;
        for (;;) {
            if (root[v]) { r = *root[v]; break; }
            if (!next[v]) { r = v; break; }
            if (auto on_path = std::ranges::find(path, v); on_path != path.end()) {
                r = *std::min_element(on_path, path.end());
                break;
            }
            path.push_back(v);
            v = *next[v];
        }
        root[v] = r;
        for (auto p : path) root[p] = r;
    }

    std::vector<std::size_t> root_order;
    std::map<std::size_t, std::vector<std::string>> blocked;  // root -> types to report
    std::map<std::size_t, std::size_t> first_blocked;          // root -> message index of the first
    for (std::size_t v = 0; v < n; ++v) {
        if (releasable[v]) continue;
        const auto r = *root[v];
        if (v == r && !next[v]) continue;  // a defect is reported already; only what it blocks is new
        auto [it, inserted] = blocked.try_emplace(r);
        if (inserted) {
            root_order.push_back(r);
            first_blocked[r] = node_message[v];
        }
        it->second.push_back(node_name[v]);
    }
    for (auto r : root_order) {
        const auto& types = blocked[r];
        std::string cause;
        if (next[r]) {
            cause = "cycle " + node_name[r];
            for (auto v = *next[r];; v = *next[v]) {
                cause += " -> " + node_name[v];
                if (v == r) break;
            }
        } else {
            cause = "blocked by " + quote(node_name[r]) + ", which " + defect[r];
        }
        out.add(out.sequence_label(s) + ": " + (types.size() == 1 ? "type " : "types ") + quoted_list(types) +
                    " can never be released: " + cause,
                s, first_blocked[r]);
    }
}

// ---- across sequences: duplicates, subtypes, topics, resolvers ----

void check_duplicate_types(problem_list& out) {
    std::map<std::string, message_ref> first;
    const auto& sequences = out.shape().sequences;
    for (std::size_t s = 0; s < sequences.size(); ++s) {
        for (std::size_t m = 0; m < sequences[s].messages.size(); ++m) {
            const auto& msg = sequences[s].messages[m];
            if (msg.type.empty()) continue;
            auto [it, inserted] = first.emplace(msg.qualified_type(), message_ref{s, m});
            if (inserted) continue;
            const auto earlier = it->second;
            out.add_for_message({s, m}, earlier.sequence == s
                ? "declared twice in this sequence (messages[" + std::to_string(earlier.message) + "] and messages[" +
                      std::to_string(m) + "])"
                : "already declared in " + out.place(earlier) + "; a qualified type belongs to at most one sequence");
        }
    }
}

std::vector<std::string> subtypes_of(const problem_list& out, const type_usage& usage) {
    std::vector<std::string> names;
    for (const auto& r : usage.with_subtype) push_unique(names, out.at(r).subtype);
    return names;
}

/// A type's subtypes share one resolver and one consumer, so they must come from one topic.
void check_subtype_topics(problem_list& out, const std::string& type, const type_usage& usage) {
    std::vector<std::pair<std::string, std::vector<std::string>>> by_source;  // source -> qualified types
    std::optional<message_ref> first_deviation;
    for (const auto& r : usage.with_subtype) {
        const auto source = source_name(out.at(r));
        auto it = std::ranges::find_if(by_source, [&](const auto& entry) { return entry.first == source; });
        if (it == by_source.end()) {
            if (!by_source.empty() && !first_deviation) first_deviation = r;
            by_source.push_back({source, {}});
            it = std::prev(by_source.end());
        }
        it->second.push_back(out.at(r).qualified_type());
    }
    if (!first_deviation) return;
    std::string listing;
    for (const auto& [source, names] : by_source) listing += (listing.empty() ? "" : "; ") + source + ": " + quoted_list(names);
    out.add("subtypes of type " + quote(type) + " are declared on different topics (" + listing +
                "); all subtypes of a type must share one topic",
            first_deviation->sequence, first_deviation->message);
}

void check_subtypes(problem_list& out, const declaration_index& index) {
    const auto& resolvers = out.shape().resolvers;
    for (const auto& type : index.type_order) {
        const auto& usage = index.types.at(type);
        if (usage.with_subtype.empty()) continue;
        if (!usage.without_subtype.empty()) {
            const bool subtyped_first = !out.at(usage.first).subtype.empty();
            const auto plain = usage.without_subtype.front();
            const auto refined = usage.with_subtype.front();
            const auto deviation = subtyped_first ? plain : refined;
            out.add("type " + quote(type) + " is declared both without subtype (" + out.place(plain) +
                        ") and with subtype " + quote(out.at(refined).subtype) + " (" + out.place(refined) +
                        "); declare it with a subtype everywhere or nowhere",
                    deviation.sequence, deviation.message);
        }
        const auto resolver = resolvers.find(type);
        if (resolver == resolvers.end()) {
            const auto r = usage.with_subtype.front();
            out.add("type " + quote(type) + " is declared with subtypes " + quoted_list(subtypes_of(out, usage)) +
                        " but no subtype resolver is registered for " + quote(type),
                    r.sequence, r.message);
        } else {
            for (const auto& r : usage.with_subtype) {
                const auto& subtype = out.at(r).subtype;
                if (std::ranges::find(resolver->second.subtypes, subtype) == resolver->second.subtypes.end())
                    out.add_for_message(r, "the subtype resolver of " + quote(type) + " cannot return subtype " +
                                               quote(subtype) + " (it lists " +
                                               quoted_list(resolver->second.subtypes) + ")");
            }
        }
        check_subtype_topics(out, type, usage);
    }
}

void check_resolvers(problem_list& out, const declaration_index& index) {
    for (const auto& [type, resolver] : out.shape().resolvers) {
        const std::string prefix = "subtype resolver for type " + quote(type);
        if (!resolver.has_resolve) out.add(prefix + " has no resolve function");
        const auto usage = index.types.find(type);
        if (usage == index.types.end()) {
            out.add(prefix + ": the type is not declared in any sequence");
            continue;
        }
        if (usage->second.with_subtype.empty()) {
            out.add(prefix + ": the type is never declared with a subtype");
            continue;
        }
        const auto declared = subtypes_of(out, usage->second);
        std::vector<std::string> reported;
        for (const auto& subtype : resolver.subtypes) {
            if (std::ranges::find(declared, subtype) != declared.end() || std::ranges::find(reported, subtype) != reported.end())
                continue;
            reported.push_back(subtype);
            out.add(prefix + " can return subtype " + quote(subtype) + ", which is not declared (declared: " +
                    quoted_list(declared) + ")");
        }
    }
}

}  // namespace

std::vector<std::size_t> release_order(const std::vector<message_shape>& messages) {
    std::vector<std::size_t> order;
    std::set<std::string> released;
    const auto is_processed = [&](const std::string& name) { return released.contains(name); };
    for (bool progress = true; progress;) {
        std::vector<std::size_t> round;  // released together: each depends only on earlier rounds
        for (std::size_t m = 0; m < messages.size(); ++m) {
            const auto& msg = messages[m];
            if (msg.type.empty() || released.contains(msg.qualified_type())) continue;
            // Only a type's first declaration counts (a repeated one is reported elsewhere): a
            // later copy with another condition must not hide what blocks the first.
            const bool first_of_its_type = std::ranges::none_of(
                messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(m),
                [&](const message_shape& earlier) { return earlier.qualified_type() == msg.qualified_type(); });
            if (first_of_its_type && msg.release.satisfied(is_processed)) round.push_back(m);
        }
        for (auto m : round) released.insert(messages[m].qualified_type());
        order.insert(order.end(), round.begin(), round.end());
        progress = !round.empty();
    }
    return order;
}

std::vector<declaration_problem> find_problems(const declarations_shape& shape) {
    problem_list out(shape);
    const declaration_index index(shape);
    check_sequence_basics(out);
    for (std::size_t s = 0; s < shape.sequences.size(); ++s) {
        check_numbering_values(out, s);
        check_numbered_types(out, s);
    }
    check_conditions(out, index);
    for (std::size_t s = 0; s < shape.sequences.size(); ++s) check_releasability(out, s);
    check_duplicate_types(out);
    check_subtypes(out, index);
    check_resolvers(out, index);
    return out.take();
}

void throw_if_any(const std::vector<declaration_problem>& problems) {
    if (problems.empty()) return;
    std::vector<std::string> details;
    details.reserve(problems.size());
    for (const auto& p : problems) details.push_back(p.message);
    throw error(error_category::configuration, "invalid sequence declarations", std::move(details));
}

}  // namespace seqinbox::detail
