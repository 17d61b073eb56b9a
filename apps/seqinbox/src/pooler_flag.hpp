#pragma once
// `--pooler MODE`, taken by every subcommand that opens a PostgreSQL store: what stands between
// it and the server (seqinbox/postgresql/pooler.hpp). `migrate` needs none: it works either way.
#include <string>
#include <string_view>

#include "options.hpp"
#include "seqinbox/postgresql/pooler.hpp"

namespace seqinbox::cli {

// A macro so that each command's usage text, one string literal, can include it.
#define SEQINBOX_POOLER_FLAG_HELP                                                                          \
    "  --pooler MODE             transaction: --postgres reaches PostgreSQL through PgBouncer in transaction\n" \
    "                            pooling mode (nothing kept beyond a transaction); none: directly (default)\n"

/// Reads `--pooler` into `through` when it is the current argument.
inline bool read_pooler_flag(option_reader& r, postgresql::pooler& through) {
    const auto v = r.value("--pooler");
    if (!v) return false;
    const auto named = postgresql::pooler_named(*v);
    if (!named) throw usage_error(r.prefix() + "option '--pooler' expects none or transaction, not '" + std::string(*v) + "'");
    through = *named;
    return true;
}

}  // namespace seqinbox::cli
