#pragma once
// Validated declarations indexed for the engine: qualified type -> its sequence and declaration,
// and which types' conditions name it (so a release pass fetches only what may become ready).
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "seqinbox/declare/problems.hpp"
#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::detail {

template <class Message>
class catalog {
public:
    struct type_entry {
        const sequence_declaration<Message>* sequence;
        const message_declaration<Message>* declaration;
        std::string qualified;
        std::vector<std::string> dependents;  ///< types whose release condition names this one
        const std::vector<std::string>* sequence_types;  ///< all types of its sequence (to close it)
    };

    /// Validates (throws seqinbox::error, configuration) and indexes.
    explicit catalog(declarations<Message> decls);

    catalog(const catalog&) = delete;  // entries point into decls_
    catalog& operator=(const catalog&) = delete;

    const type_entry* find(const std::string& qualified) const {
        auto it = types_.find(qualified);
        return it == types_.end() ? nullptr : &it->second;
    }

    const subtype_resolver<Message>* resolver(const std::string& type) const {
        auto it = decls_.resolvers.find(type);
        return it == decls_.resolvers.end() ? nullptr : &it->second;
    }

    /// The qualified types of the sequence named `name`, or nullptr when none is declared.
    const std::vector<std::string>* types_of_sequence(const std::string& name) const {
        for (std::size_t i = 0; i < decls_.sequences.size(); ++i)
            if (decls_.sequences[i].name == name) return &sequence_types_[i];
        return nullptr;
    }

    const declarations<Message>& declared() const noexcept { return decls_; }

private:
    declarations<Message> decls_;
    std::vector<std::vector<std::string>> sequence_types_;  // reserved up front: entries point here
    std::unordered_map<std::string, type_entry> types_;
};

// Not inline, so that the common instantiation below is compiled once, in the core library.
template <class Message>
catalog<Message>::catalog(declarations<Message> decls) : decls_(std::move(decls)) {
    validate(decls_);
    sequence_types_.reserve(decls_.sequences.size());
    for (const auto& seq : decls_.sequences) {
        auto& names = sequence_types_.emplace_back();
        for (const auto& msg : seq.messages) names.push_back(msg.qualified_type());
        for (const auto& msg : seq.messages)
            types_.emplace(msg.qualified_type(), type_entry{&seq, &msg, msg.qualified_type(), {}, &names});
    }
    for (auto& named : types_) {  // not a structured binding: clang 14 (the fuzz build) cannot capture one
        const std::string& name = named.first;
        named.second.declaration->release.for_each_predecessor([&](const std::string& predecessor) {
            auto& deps = types_.at(predecessor).dependents;
            if (std::ranges::find(deps, name) == deps.end()) deps.push_back(name);
        });
    }
}

// Messages decoded as text (decoder::header_decoder's): compiled in src/detail/catalog.cpp.
extern template class catalog<std::string>;

}  // namespace seqinbox::detail
