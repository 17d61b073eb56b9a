// `seqinbox validate`: see validate.hpp. The summary lists each sequence's types in release
// order (seqinbox::release_order: the order in which the release fixpoint reaches them).
#include "validate.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "json.hpp"
#include "options.hpp"
#include "seqinbox/declare/problems.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/yaml/document.hpp"
#include "seqinbox/yaml/loader.hpp"
#include "seqinbox/yaml/registry.hpp"

namespace seqinbox::cli {

namespace {

using message = std::string;  // the program has no message type of its own; names bind to envelopes

constexpr std::string_view validate_usage =
    "usage: seqinbox validate [--assume-registered] [--json] FILE...\n"
    "\n"
    "Checks sequence declaration files (YAML) and prints a summary per sequence:\n"
    "its types and its release graph in topological order.\n"
    "\n"
    "  --assume-registered  accept extractor, filter and resolver names that are not built-in\n"
    "                       (the application registers them in C++); they are listed as assumed\n"
    "  --json               print the summary as JSON\n"
    "\n"
    "Built-in names: key, header:NAME, json:/pointer.\n"
    "A type without missingContextId handles a message without a context id directly in the\n"
    "library and dead-letters it in seqinbox run; each type's line says which applies.\n"
    "A numbered sequence (sequenceNumber on its types) says its extractors, first number, gap\n"
    "timeout and gap policy; its types are released by number.\n"
    "exit status: 0 every file is valid, 1 a file has problems (all listed on stderr),\n"
    "             2 usage error or unreadable file\n";

struct checked_file {
    yaml::document doc;
    yaml::load_result<message> result;
};

/// A numbered type is released by its number, which its sequence's validation made its only rule.
std::string release_text(const condition& c, const yaml::message_entry& entry) {
    if (entry.sequence_number) return "by number " + entry.sequence_number->name;
    return c.is_always() ? "immediately" : describe(c);
}

std::string name_or_none(const std::optional<yaml::name_use>& use) { return use ? use->name : "-"; }

/// The policy as declared, else both defaults: the library's and the relay's.
std::string missing_context_id_text(const yaml::message_entry& entry) {
    if (entry.missing_context_id) return " (if missing: " + std::string(yaml::policy_name(*entry.missing_context_id)) + ")";
    return " (if missing: " + std::string(yaml::policy_name(yaml::load_options{}.missing_context_id)) + " by default, " +
           std::string(yaml::policy_name(yaml::relay_missing_context_id)) + " in seqinbox run)";
}

std::string missing_context_id_json(const yaml::message_entry& entry) {
    const auto& declared = entry.missing_context_id;
    const auto resolved = [&](missing_context_id_policy fallback) { return json_string(yaml::policy_name(declared.value_or(fallback))); };
    return "{\"declared\": " + (declared ? json_string(yaml::policy_name(*declared)) : "null") +
           ", \"library\": " + resolved(yaml::load_options{}.missing_context_id) +
           ", \"relay\": " + resolved(yaml::relay_missing_context_id) + "}";
}

/// The sequence number extractors of a sequence's types, each once, in declaration order.
std::vector<std::string> number_extractors(const yaml::sequence_entry& entry) {
    std::vector<std::string> names;
    for (const auto& m : entry.messages)
        if (m.sequence_number && std::ranges::find(names, m.sequence_number->name) == names.end())
            names.push_back(m.sequence_number->name);
    return names;
}

std::string first_number_text(const numbering_rules& rules) {
    return rules.first_number ? std::to_string(*rules.first_number) : "first seen";
}

/// "numbered by header:seq, first number 1, gap timeout 10m, policy skip".
std::string numbering_text(const yaml::sequence_entry& entry) {
    std::string names;
    for (const auto& n : number_extractors(entry)) names += (names.empty() ? "" : ", ") + n;
    const auto& timeout = entry.gap_timeout_text;
    return "numbered by " + names + ", first number " + first_number_text(entry.numbering) + ", gap timeout " +
           (timeout.empty() ? "none" : timeout) + ", policy " + std::string(to_string(entry.numbering.on_gap));
}

std::string numbering_json(const yaml::sequence_entry& entry) {
    const auto& rules = entry.numbering;
    std::string names;
    for (const auto& n : number_extractors(entry)) names += (names.empty() ? "" : ", ") + json_string(n);
    return "{\"extractors\": [" + names + "], \"first_number\": " +
           (rules.first_number ? std::to_string(*rules.first_number) : "null") + ", \"gap_timeout\": " +
           (rules.gap_timeout ? json_string(entry.gap_timeout_text) : "null") + ", \"gap_timeout_seconds\": " +
           (rules.gap_timeout ? std::to_string(rules.gap_timeout->count()) : "null") +
           ", \"gap_policy\": " + json_string(to_string(rules.on_gap)) + "}";
}

/// "maxWaiting 500, reject" or "maxWaiting 10000 (the default), dead-letter-newest".
std::string buffer_text(const buffer_limit& b) {
    return "maxWaiting " + std::to_string(b.limit()) + (b.max_waiting ? "" : " (the default)") + ", " + std::string(to_string(b.on_overflow));
}

std::string buffer_json(const buffer_limit& b) {
    return "{\"max_waiting\": " + std::to_string(b.limit()) + ", \"declared\": " + (b.max_waiting ? "true" : "false") +
           ", \"overflow_policy\": " + json_string(to_string(b.on_overflow)) + "}";
}

void print_text(const checked_file& f, std::ostream& out) {
    const auto& decls = f.result.decls;
    out << f.doc.file << ": valid, " << decls.sequences.size() << (decls.sequences.size() == 1 ? " sequence\n" : " sequences\n");
    for (std::size_t s = 0; s < decls.sequences.size(); ++s) {
        const auto& seq = decls.sequences[s];
        const auto& recording = f.doc.sequences[s].recording_text;
        const auto& window = f.doc.sequences[s].deduplication_window_text;
        out << "sequence " << seq.name << " (retention " << f.doc.sequences[s].retention_text << ", "
            << (window.empty() ? "" : "deduplication window " + window + ", ")
            << (recording.empty() ? "" : "recording until " + recording + ", ") << buffer_text(seq.buffer) << ", "
            << seq.messages.size() << (seq.messages.size() == 1 ? " type)\n" : " types)\n");
        if (seq.numbered()) out << "  " << numbering_text(f.doc.sequences[s]) << '\n';
        std::size_t step = 0;
        for (auto m : release_order(seq)) {
            const auto& msg = seq.messages[m];
            const auto& entry = f.doc.sequences[s].messages[m];
            out << "  " << ++step << ". " << msg.qualified_type() << ": " << release_text(msg.release, entry)
                << "; context id " << name_or_none(entry.context_id) << missing_context_id_text(entry);
            if (entry.filter) out << ", filter " << entry.filter->name;
            if (!msg.topic.empty()) out << ", topic " << msg.topic;
            if (!msg.cluster.empty()) out << ", cluster " << msg.cluster;
            out << '\n';
        }
    }
    for (const auto& [type, resolver] : decls.resolvers) {
        const auto it = std::ranges::find(f.doc.resolvers, type, &yaml::resolver_entry::type);
        out << "subtype resolver of " << type << ": " << it->resolver.name << " (" << seqinbox::detail::quoted_list(resolver.subtypes)
            << ")\n";
    }
    std::set<std::string> listed;
    for (const auto& a : f.result.assumed)
        if (listed.insert(a.name).second)
            out << "assumed registered: " << a.name << " (" << f.doc.file << ':' << a.where.line << ':' << a.where.column << ")\n";
}

void print_json(const std::vector<checked_file>& files, std::ostream& out) {
    out << "{\"files\": [";
    for (std::size_t i = 0; i < files.size(); ++i) {
        const auto& f = files[i];
        const auto& decls = f.result.decls;
        out << (i ? ", " : "") << "{\"file\": " << json_string(f.doc.file)
            << ", \"valid\": " << (f.result.problems.empty() ? "true" : "false") << ", \"errors\": [";
        const auto errors = f.result.messages();
        for (std::size_t e = 0; e < errors.size(); ++e) out << (e ? ", " : "") << json_string(errors[e]);
        out << "], \"sequences\": [";
        for (std::size_t s = 0; f.result.problems.empty() && s < decls.sequences.size(); ++s) {
            const auto& seq = decls.sequences[s];
            out << (s ? ", " : "") << "{\"name\": " << json_string(seq.name) << ", \"retention\": "
                << json_string(f.doc.sequences[s].retention_text) << ", \"retention_seconds\": " << seq.retention.count()
                << ", \"buffer\": " << buffer_json(seq.buffer)
                << ", \"numbering\": " << (seq.numbered() ? numbering_json(f.doc.sequences[s]) : "null") << ", \"release_order\": [";
            bool first = true;
            for (auto m : release_order(seq)) {
                const auto& msg = seq.messages[m];
                const auto& entry = f.doc.sequences[s].messages[m];
                out << (first ? "" : ", ") << "{\"type\": " << json_string(msg.type) << ", \"subtype\": " << json_string(msg.subtype)
                    << ", \"qualified_type\": " << json_string(msg.qualified_type())
                    << ", \"release\": " << json_string(release_text(msg.release, entry))
                    << ", \"context_id_extractor\": " << json_string(name_or_none(entry.context_id))
                    << ", \"sequence_number_extractor\": " << (entry.sequence_number ? json_string(entry.sequence_number->name) : "null")
                    << ", \"missing_context_id\": " << missing_context_id_json(entry)
                    << ", \"message_filter\": " << (entry.filter ? json_string(entry.filter->name) : "null")
                    << ", \"topic\": " << json_string(msg.topic) << ", \"cluster\": " << json_string(msg.cluster) << "}";
                first = false;
            }
            out << "], \"deduplication_window_seconds\": " << seq.kept_closed_for().count() << ", \"recording_until\": "
                << (f.doc.sequences[s].recording_text.empty() ? "null" : json_string(f.doc.sequences[s].recording_text)) << "}";
        }
        out << "], \"assumed\": [";
        for (std::size_t a = 0; a < f.result.assumed.size(); ++a) {
            const auto& use = f.result.assumed[a];
            out << (a ? ", " : "") << "{\"name\": " << json_string(use.name) << ", \"line\": " << use.where.line
                << ", \"column\": " << use.where.column << "}";
        }
        out << "]}";
    }
    out << "]}\n";
}

}  // namespace

int validate_command(std::span<const std::string_view> args) {
    yaml::load_options options;
    bool json = false;
    std::vector<std::string> paths;
    for (option_reader r(args, "validate"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << validate_usage;
            return exit_ok;
        }
        if (r.flag("--assume-registered")) options.assume_registered = true;
        else if (r.flag("--json")) json = true;
        else if (r.current().starts_with('-') && r.current() != "-") r.unknown();
        else paths.emplace_back(r.current());
    }
    if (paths.empty()) throw usage_error("seqinbox validate: no FILE given");

    // Read every file first: an unreadable one is a usage problem, reported before any check.
    std::vector<checked_file> files;
    for (const auto& path : paths) {
        try {
            files.push_back({yaml::parse_file(path), {}});
        } catch (const seqinbox::error& e) {
            std::cerr << "seqinbox validate: " << e.what() << '\n';
            return exit_usage;
        }
    }
    const yaml::registry<message> no_names;  // the program knows only the built-ins
    bool valid = true;
    for (auto& f : files) {
        f.result = yaml::bind_names(f.doc, no_names, options);
        for (const auto& line : f.result.messages()) std::cerr << line << '\n';
        valid = valid && f.result.problems.empty();
    }
    if (json) {
        print_json(files, std::cout);
    } else {
        for (const auto& f : files)
            if (f.result.problems.empty()) print_text(f, std::cout);
        if (!valid) {
            std::size_t count = 0;
            for (const auto& f : files) count += f.result.problems.size();
            std::cerr << count << (count == 1 ? " problem" : " problems") << " found\n";
        }
    }
    return valid ? exit_ok : exit_check_failed;
}

}  // namespace seqinbox::cli
