#pragma once
// The names a declaration file may use, filled by the application in C++: context id
// extractors, message filters and subtype resolvers (each with every subtype it can return).
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/declare/sequence.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/yaml/builtin.hpp"

namespace seqinbox::yaml {

/// Named callables for declarations<Message>. Names of built-ins (`key`, `header:...`,
/// `json:...`) are reserved. Not thread-safe while being filled; read-only use is.
template <class Message>
class registry {
public:
    using resolve_function = std::function<std::string(const Message&, const envelope&)>;

    registry& add_extractor(std::string name, context_id_extractor<Message> extract) {
        return add(extractors_, "context id extractor", std::move(name), std::move(extract));
    }
    registry& add_filter(std::string name, message_filter<Message> filter) {
        return add(filters_, "message filter", std::move(name), std::move(filter));
    }
    /// `subtypes` lists every value `resolve` can return; validation compares it with the file.
    registry& add_resolver(std::string name, resolve_function resolve, std::vector<std::string> subtypes) {
        return add(resolvers_, "subtype resolver", std::move(name),
                   subtype_resolver<Message>{std::move(resolve), std::move(subtypes)});
    }

    const context_id_extractor<Message>* extractor(std::string_view name) const { return find(extractors_, name); }
    const message_filter<Message>* filter(std::string_view name) const { return find(filters_, name); }
    const subtype_resolver<Message>* resolver(std::string_view name) const { return find(resolvers_, name); }

private:
    template <class T>
    static const T* find(const std::map<std::string, T, std::less<>>& table, std::string_view name) {
        auto it = table.find(name);
        return it == table.end() ? nullptr : &it->second;
    }

    template <class T>
    registry& add(std::map<std::string, T, std::less<>>& table, std::string_view role, std::string name, T callable) {
        const auto fail = [&](const std::string& why) {
            throw error(error_category::misuse, "cannot register " + std::string(role) + " '" + name + "': " + why);
        };
        if (name.empty()) fail("the name is empty");
        if (find_builtin(name).state != builtin_lookup::status::not_builtin)
            fail("the name is reserved for a built-in (key, header:NAME, json:/pointer)");
        if (!has_function(callable)) fail("the function is empty");
        if (!table.emplace(name, std::move(callable)).second) fail("the name is registered already");
        return *this;
    }

    template <class F>
    static bool has_function(const F& f) { return static_cast<bool>(f); }
    static bool has_function(const subtype_resolver<Message>& r) { return static_cast<bool>(r.resolve); }

    std::map<std::string, context_id_extractor<Message>, std::less<>> extractors_;
    std::map<std::string, message_filter<Message>, std::less<>> filters_;
    std::map<std::string, subtype_resolver<Message>, std::less<>> resolvers_;
};

}  // namespace seqinbox::yaml
