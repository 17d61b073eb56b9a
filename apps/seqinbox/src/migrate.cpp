// `seqinbox migrate`: see migrate.hpp.
#include "migrate.hpp"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "database_flag.hpp"
#include "options.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"
#ifdef SEQINBOX_CLI_HAS_MARIADB
#include "seqinbox/mariadb/migrate.hpp"
#endif

namespace seqinbox::cli {

namespace {

constexpr std::string_view migrate_usage =
    "usage: seqinbox migrate --postgres CONNINFO [--target N]\n"
    "       seqinbox migrate --database mariadb://USER:PASSWORD@HOST:PORT/DATABASE [--target N]\n"
    "\n"
    "Applies the schema scripts this build embeds (schema/postgresql/ or schema/mariadb/,\n"
    "V<n>__<name>.sql) that the database lacks, in order, recorded in seqinbox_schema_history\n"
    "(PostgreSQL: each in its own transaction; MariaDB commits each DDL statement on its own, and a\n"
    "script stopped halfway is completed by the next run). Safe to run concurrently and repeatedly.\n"
    "Refuses a database whose schema is newer than this build or whose applied scripts differ from\n"
    "the embedded ones.\n"
    "\n"
    SEQINBOX_DATABASE_FLAG_HELP
    "  --target N                stop at schema version N (default: the latest)\n"
    "\n"
    "exit status: 0 the database is at the target version, 1 refused or unreachable,\n"
    "             2 usage error\n";

std::string versions(const std::vector<int>& list) {
    std::string text;
    for (int v : list) text += (text.empty() ? "V" : ", V") + std::to_string(v);
    return text.empty() ? "none" : text;
}

/// The MariaDB store's latest schema version, 0 in a build without it.
int highest_other_version() {
#ifdef SEQINBOX_CLI_HAS_MARIADB
    return mariadb::latest_schema_version();
#else
    return 0;
#endif
}

struct migrate_outcome {
    std::vector<int> applied, already_applied;
    int schema_version, latest;
};

/// The store's migrate() for `conninfo`, the MariaDB one for a mariadb:// URL.
migrate_outcome migrate_database(const std::string& conninfo, std::optional<int> target) {
    if (names_mariadb(conninfo)) {
#ifdef SEQINBOX_CLI_HAS_MARIADB
        auto r = mariadb::migrate(conninfo, {.target_version = target});
        return {std::move(r.applied), std::move(r.already_applied), r.schema_version, mariadb::latest_schema_version()};
#else
        throw error(error_category::configuration, "this build of seqinbox has no MariaDB store (built without SOCI's MySQL backend)");
#endif
    }
    auto r = postgresql::migrate(conninfo, {.target_version = target});
    return {std::move(r.applied), std::move(r.already_applied), r.schema_version, postgresql::latest_schema_version()};
}

}  // namespace

int migrate_command(std::span<const std::string_view> args) {
    std::string conninfo;
    std::optional<int> target;
    // Checked against the store's own latest version when it migrates (misuse: exit 1).
    const auto latest = static_cast<std::uint64_t>(std::max(postgresql::latest_schema_version(), highest_other_version()));
    for (option_reader r(args, "migrate"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << migrate_usage;
            return exit_ok;
        }
        if (read_database_flag(r, conninfo)) continue;
        if (auto t = r.value("--target")) target = static_cast<int>(r.number("--target", *t, 0, latest));
        else r.unknown();
    }
    require_option("migrate", !conninfo.empty(), "--postgres");
    try {
        const auto report = migrate_database(conninfo, target);
        std::cout << "applied: " << versions(report.applied) << '\n'
                  << "already applied: " << versions(report.already_applied) << '\n'
                  << "schema version: " << report.schema_version << " (this build: " << report.latest << ")\n";
        return exit_ok;
    } catch (const seqinbox::error& e) {
        std::cerr << "seqinbox migrate: " << to_string(e.category()) << ": " << e.what() << '\n';
        return exit_check_failed;
    }
}

}  // namespace seqinbox::cli
