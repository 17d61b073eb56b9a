#pragma once
#include <string>
#include <string_view>

namespace seqinbox {

/// `type` or `type.SUBTYPE`: the unit a release condition and a claim key talk about.
inline std::string qualify(std::string_view type, std::string_view subtype) {
    std::string name(type);
    if (!subtype.empty()) {
        name += '.';
        name += subtype;
    }
    return name;
}

}  // namespace seqinbox
