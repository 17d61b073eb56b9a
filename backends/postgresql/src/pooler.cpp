#include "seqinbox/postgresql/pooler.hpp"

namespace seqinbox::postgresql {

std::optional<pooler> pooler_named(std::string_view name) noexcept {
    if (name == "none") return pooler::none;
    if (name == "transaction") return pooler::transaction;
    return std::nullopt;
}

}  // namespace seqinbox::postgresql
