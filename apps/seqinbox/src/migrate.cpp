// `seqinbox migrate`: see migrate.hpp.
#include "migrate.hpp"

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/migrate.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view migrate_usage =
    "usage: seqinbox migrate --postgres CONNINFO [--target N]\n"
    "\n"
    "Applies the schema scripts this build embeds (schema/postgresql/V<n>__<name>.sql) that the database\n"
    "lacks, in order, each in its own transaction, recorded in seqinbox_schema_history.\n"
    "Safe to run concurrently and repeatedly. Refuses a database whose schema is newer than\n"
    "this build or whose applied scripts differ from the embedded ones.\n"
    "\n"
    "  --postgres CONNINFO  libpq connection string, e.g. 'host=db port=5432 dbname=app user=inbox'\n"
    "                       or postgresql://inbox@db/app\n"
    "  --target N           stop at schema version N (default: the latest)\n"
    "\n"
    "exit status: 0 the database is at the target version, 1 refused or unreachable,\n"
    "             2 usage error\n";

std::string versions(const std::vector<int>& list) {
    std::string text;
    for (int v : list) text += (text.empty() ? "V" : ", V") + std::to_string(v);
    return text.empty() ? "none" : text;
}

}  // namespace

int migrate_command(std::span<const std::string_view> args) {
    std::optional<std::string> conninfo;
    postgresql::migrate_options options;
    const auto latest = static_cast<std::uint64_t>(postgresql::latest_schema_version());
    for (option_reader r(args, "migrate"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << migrate_usage;
            return exit_ok;
        }
        if (auto v = r.value("--postgres")) conninfo = std::string(*v);
        else if (auto t = r.value("--target")) options.target_version = static_cast<int>(r.number("--target", *t, 0, latest));
        else r.unknown();
    }
    require_option("migrate", conninfo.has_value(), "--postgres");
    try {
        const auto report = postgresql::migrate(*conninfo, options);
        std::cout << "applied: " << versions(report.applied) << '\n'
                  << "already applied: " << versions(report.already_applied) << '\n'
                  << "schema version: " << report.schema_version << " (this build: " << latest << ")\n";
        return exit_ok;
    } catch (const seqinbox::error& e) {
        std::cerr << "seqinbox migrate: " << to_string(e.category()) << ": " << e.what() << '\n';
        return exit_check_failed;
    }
}

}  // namespace seqinbox::cli
