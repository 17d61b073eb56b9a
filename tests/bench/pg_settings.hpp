#pragma once
// What the PostgreSQL benchmarks print about the server they measured.
#include <string>

#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench/bench_support.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::bench {

/// The settings that decide what a commit costs, as `server_<name> on|off` (1 or 0).
inline void print_server_settings(soci::session& session) {
    for (const std::string name : {"fsync", "synchronous_commit"}) {
        std::string value;
        session << "SELECT current_setting(:name)", soci::use(name), soci::into(value);
        print("server_" + name, value == "off" ? 0.0 : 1.0);
    }
}

}  // namespace seqinbox::bench
