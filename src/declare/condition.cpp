// The one renderer of release conditions (see seqinbox/declare/condition.hpp).
#include "seqinbox/declare/condition.hpp"

namespace seqinbox {

namespace {

std::string describe_node(const condition& c, condition_notation notation, bool nested) {
    const bool calls = notation == condition_notation::calls;
    switch (c.node_kind()) {
    case condition::kind::always: return calls ? "always" : "nothing";
    case condition::kind::predecessor: return (calls ? "after " : "") + c.predecessor();
    case condition::kind::all_of:
    case condition::kind::any_of: break;
    }
    const bool all = c.node_kind() == condition::kind::all_of;
    const std::string_view glue = calls ? ", " : all ? " and " : " or ";
    std::string text;
    for (const auto& child : c.children()) {
        if (!text.empty()) text += glue;
        text += describe_node(child, notation, true);
    }
    if (calls) return std::string(to_string(c.node_kind())) + '(' + text + ')';
    return nested ? '(' + text + ')' : text;
}

}  // namespace

std::string_view to_string(condition::kind k) noexcept {
    switch (k) {
    case condition::kind::always: return "always";
    case condition::kind::predecessor: return "predecessor";
    case condition::kind::all_of: return "all_of";
    case condition::kind::any_of: return "any_of";
    }
    return "?";
}

std::string describe(const condition& c, condition_notation notation) { return describe_node(c, notation, false); }

}  // namespace seqinbox
