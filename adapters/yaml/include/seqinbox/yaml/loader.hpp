#pragma once
// Loading declaration files into declarations<Message>: parse (compiled, yaml-cpp inside), bind
// each name to a registered callable or a built-in, validate, and report every problem with
// its file:line:col.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/declare/problems.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/yaml/builtin.hpp"
#include "seqinbox/yaml/document.hpp"
#include "seqinbox/yaml/registry.hpp"

namespace seqinbox::yaml {

struct load_options {
    /// Names neither built-in nor registered are accepted (and listed in `assumed`) instead of
    /// rejected; calling one throws. For checking files without the application's C++.
    bool assume_registered = false;
    /// The policy of message types whose file does not set `missingContextId`. The library's
    /// default is `handle` (docs/processing.md step 2); the relay passes `dead_letter`.
    missing_context_id_policy missing_context_id = missing_context_id_policy::handle;
};

/// The relay's (`seqinbox run`) load_options::missing_context_id: a record it cannot sequence
/// goes to the dead-letter topic instead of being published out of order.
inline constexpr missing_context_id_policy relay_missing_context_id = missing_context_id_policy::dead_letter;

template <class Message>
struct load_result {
    std::string file;
    declarations<Message> decls;
    std::vector<problem> problems;  ///< every problem, in file order; empty: `decls` are valid
    std::vector<name_use> assumed;  ///< names accepted through load_options::assume_registered

    /// Each problem as `file:line:col: text`.
    std::vector<std::string> messages() const {
        std::vector<std::string> out;
        for (const auto& p : problems) out.push_back(format(file, p));
        return out;
    }
};

namespace detail {

/// Binds the names of one document; see bind_names().
template <class Message>
class binder {
public:
    binder(const registry<Message>& names, const load_options& options, load_result<Message>& out)
        : names_(names), options_(options), out_(out) {}

    context_id_extractor<Message> extractor(const name_use& use) {
        if (const auto* registered = names_.extractor(use.name)) return *registered;
        auto builtin = find_builtin(use.name);
        if (builtin.state == builtin_lookup::status::ok)
            return [read = std::move(builtin.read)](const Message&, const envelope& e) { return read(e); };
        return unresolved<std::optional<std::string>>(use, "context id extractor", builtin);
    }

    /// A context id extractor's name (registered or built-in), its text read as the number.
    sequence_number_extractor<Message> sequence_number(const name_use& use) {
        if (const auto* registered = names_.extractor(use.name))
            return [read = *registered](const Message& m, const envelope& e) { return number_in(read(m, e)); };
        auto builtin = find_builtin(use.name);
        if (builtin.state == builtin_lookup::status::ok)
            return [read = std::move(builtin.read)](const Message&, const envelope& e) { return number_in(read(e)); };
        return unresolved<std::optional<std::int64_t>>(use, "sequence number extractor", builtin);
    }

    message_filter<Message> filter(const name_use& use) {
        if (const auto* registered = names_.filter(use.name)) return *registered;
        return unresolved<bool>(use, "message filter", {});  // there are no built-in filters
    }

    /// A built-in or assumed resolver can return exactly the subtypes the file declares.
    subtype_resolver<Message> resolver(const name_use& use, std::vector<std::string> declared) {
        if (const auto* registered = names_.resolver(use.name)) return *registered;
        auto builtin = find_builtin(use.name);
        if (builtin.state == builtin_lookup::status::ok)
            return {[read = std::move(builtin.read)](const Message&, const envelope& e) { return read(e).value_or(""); },
                    std::move(declared)};
        return {unresolved<std::string>(use, "subtype resolver", builtin), std::move(declared)};
    }

private:
    static std::optional<std::int64_t> number_in(const std::optional<std::string>& text) {
        return text ? parse_sequence_number(*text) : std::nullopt;
    }

    static std::string how_to_provide(std::string_view role) {
        if (role == "message filter") return "register it in C++";  // there are no built-in filters
        return std::string("register it in C++") + (role == "sequence number extractor" ? " as a context id extractor" : "") +
               " or use a built-in (key, header:NAME, json:/pointer)";
    }

    /// Reports the name (or records it as assumed) and returns a function that must never run.
    template <class Result>
    std::function<Result(const Message&, const envelope&)> unresolved(const name_use& use, std::string_view role,
                                                                      const builtin_lookup& builtin) {
        if (builtin.state == builtin_lookup::status::malformed) {
            out_.problems.push_back({use.where, std::string(role) + " '" + use.name + "': " + builtin.problem});
        } else if (options_.assume_registered) {
            out_.assumed.push_back(use);
        } else {
            out_.problems.push_back({use.where, "unknown " + std::string(role) + " '" + use.name + "': " + how_to_provide(role)});
        }
        return [name = use.name, role = std::string(role)](const Message&, const envelope&) -> Result {
            throw error(error_category::misuse, role + " '" + name + "' was assumed registered but is not");
        };
    }

    const registry<Message>& names_;
    const load_options& options_;
    load_result<Message>& out_;
};

}  // namespace detail

/// Builds the declarations of `doc` and collects every problem: the document's own, unknown
/// names, and the validation of docs/declarations.md located at the node each is about.
template <class Message>
load_result<Message> bind_names(const document& doc, const registry<Message>& names, const load_options& options = {}) {
    load_result<Message> out;
    out.file = doc.file;
    out.problems = doc.problems;
    detail::binder<Message> binder(names, options, out);
    for (const auto& seq : doc.sequences) {
        sequence_declaration<Message> s{seq.name,   seq.retention, {}, seq.recording_until, seq.deduplication_window,
                                        seq.buffer, seq.numbering};
        for (const auto& m : seq.messages) {
            message_declaration<Message> d{m.type, m.subtype, {}, {}, m.release, m.topic, m.cluster,
                                           m.missing_context_id.value_or(options.missing_context_id)};
            if (m.context_id) d.context_id = binder.extractor(*m.context_id);
            if (m.filter) d.filter = binder.filter(*m.filter);
            if (m.sequence_number) d.sequence_number = binder.sequence_number(*m.sequence_number);
            s.messages.push_back(std::move(d));
        }
        out.decls.sequences.push_back(std::move(s));
    }
    for (const auto& r : doc.resolvers) {
        std::vector<std::string> declared;
        for (const auto& seq : doc.sequences)
            for (const auto& m : seq.messages)
                if (m.type == r.type && !m.subtype.empty() && std::ranges::find(declared, m.subtype) == declared.end())
                    declared.push_back(m.subtype);
        out.decls.resolvers.emplace(r.type, binder.resolver(r.resolver, std::move(declared)));
    }
    for (auto& p : locate(doc, find_problems(out.decls))) out.problems.push_back(std::move(p));
    std::ranges::stable_sort(out.problems, {}, [](const problem& p) { return std::pair(p.where.line, p.where.column); });
    return out;
}

namespace detail {

template <class Message>
declarations<Message> valid_or_throw(load_result<Message> result) {
    if (!result.problems.empty())
        throw error(error_category::configuration, "invalid sequence declarations in " + result.file, result.messages());
    return std::move(result.decls);
}

}  // namespace detail

/// Loads declarations from `text`, named `name` in error messages. Throws seqinbox::error
/// (configuration) whose details() list every problem as `name:line:col: text`.
template <class Message>
declarations<Message> load_string(std::string_view text, std::string name, const registry<Message>& names,
                                  const load_options& options = {}) {
    return detail::valid_or_throw(bind_names(parse_string(text, std::move(name)), names, options));
}

/// Loads declarations from a file; throws as load_string, and also when the file cannot be read.
template <class Message>
declarations<Message> load_file(const std::filesystem::path& path, const registry<Message>& names,
                                const load_options& options = {}) {
    return detail::valid_or_throw(bind_names(parse_file(path), names, options));
}

}  // namespace seqinbox::yaml
