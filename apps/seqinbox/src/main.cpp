// The `seqinbox` program: a table of subcommands, each with a one-line summary and its own --help.
// Exit status: 0 success, 1 a check failed (or an error stopped the command), 2 usage error.
#include <algorithm>
#include <array>
#include <exception>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "demo.hpp"
#include "options.hpp"
#ifdef SEQINBOX_CLI_HAS_YAML
#include "validate.hpp"
#endif
#ifdef SEQINBOX_CLI_HAS_POSTGRESQL
#include "migrate.hpp"
#include "operate.hpp"
#endif
#ifdef SEQINBOX_CLI_HAS_KAFKA
#include "dev_kafka.hpp"
#endif
#ifdef SEQINBOX_CLI_HAS_RELAY
#include "housekeep.hpp"
#include "redrive.hpp"
#include "run.hpp"
#include "serve.hpp"
#endif

namespace {

using namespace seqinbox::cli;

struct subcommand {
    std::string_view name;
    std::string_view summary;
    int (*run)(std::span<const std::string_view> args);  ///< throws usage_error on a bad command line
    std::string_view help_hint;                          ///< "seqinbox NAME --help"
};

constexpr std::array subcommands{
    subcommand{"demo", "run an order sequence through three concurrent in-memory instances and verify it", demo_command,
               "seqinbox demo --help"},
#ifdef SEQINBOX_CLI_HAS_YAML
    subcommand{"validate", "check sequence declaration files (YAML) and summarise them", validate_command,
               "seqinbox validate --help"},
#endif
#ifdef SEQINBOX_CLI_HAS_POSTGRESQL
    subcommand{"migrate", "bring a PostgreSQL or MariaDB database to this build's schema version", migrate_command,
               "seqinbox migrate --help"},
    subcommand{"status", "instances and messages per state and type", status_command, "seqinbox status --help"},
    subcommand{"sequences", "list expired or expiring instances", sequences_command, "seqinbox sequences --help"},
    subcommand{"show", "one instance with a page of its messages and their pending actions", show_command, "seqinbox show --help"},
    subcommand{"consume", "replay a waiting message now, whatever its condition", consume_command, "seqinbox consume --help"},
    subcommand{"expire", "mark a waiting message PROCESSED without replay", expire_command, "seqinbox expire --help"},
    subcommand{"consume-all", "replay every waiting message of an instance now", consume_all_command,
               "seqinbox consume-all --help"},
    subcommand{"close", "close an instance without replay", close_command, "seqinbox close --help"},
    subcommand{"skip-gap", "give up the numbers a numbered instance misses before its first waiting one", skip_gap_command,
               "seqinbox skip-gap --help"},
#endif
#ifdef SEQINBOX_CLI_HAS_RELAY
    subcommand{"housekeep", "run the housekeeping jobs once (--once)", housekeep_command, "seqinbox housekeep --help"},
    subcommand{"run", "the relay: Kafka in, ordered and deduplicated Kafka out, until SIGTERM", run_command,
               "seqinbox run --help"},
    subcommand{"serve", "the operator HTTP API and web console of an inbox database, until SIGTERM", serve_command,
               "seqinbox serve --help"},
    subcommand{"redrive", "copy dead letters back to an input topic, once each", redrive_command, "seqinbox redrive --help"},
#endif
#ifdef SEQINBOX_CLI_HAS_KAFKA
    subcommand{"dev-kafka", "an in-memory Kafka cluster for trying things out and tests, until SIGTERM", dev_kafka_command,
               "seqinbox dev-kafka --help"},
#endif
};

const subcommand* find(std::string_view name) {
    auto it = std::ranges::find(subcommands, name, &subcommand::name);
    return it == subcommands.end() ? nullptr : &*it;
}

void usage(std::ostream& out) {
    out << "usage: seqinbox <subcommand> [options]\n"
           "       seqinbox <subcommand> --help\n"
           "\n"
           "subcommands:\n";
    for (const auto& c : subcommands) out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') << c.summary << '\n';
    out << "\n"
           "exit status: 0 success, 1 a check failed, 2 usage error\n";
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    if (args.empty()) {
        usage(std::cerr);
        return exit_usage;
    }
    const std::string_view name = args.front();
    if (name == "--help" || name == "-h") {
        usage(std::cout);
        return exit_ok;
    }
    if (name == "--version") {
        std::cout << "seqinbox " SEQINBOX_CLI_VERSION "\n";
        return exit_ok;
    }
    std::string_view hint = "seqinbox --help";  // where the usage error's fix is documented
    try {
        // `seqinbox help [subcommand]` is the same as `seqinbox [subcommand] --help`.
        if (name == "help") {
            if (args.size() == 1) {
                usage(std::cout);
                return exit_ok;
            }
            if (args.size() > 2) throw usage_error("seqinbox help: unexpected argument '" + std::string(args[2]) + "'");
            const subcommand* command = find(args[1]);
            if (command == nullptr) throw usage_error("seqinbox help: unknown subcommand '" + std::string(args[1]) + "'");
            constexpr std::array<std::string_view, 1> help{"--help"};
            return command->run(help);
        }
        const subcommand* command = find(name);
        if (command == nullptr) {
            if (name.starts_with('-')) throw usage_error("seqinbox: unknown option '" + std::string(name) + "'");
            throw usage_error("seqinbox: unknown subcommand '" + std::string(name) + "'");
        }
        hint = command->help_hint;
        return command->run(std::span(args).subspan(1));
    } catch (const usage_error& e) {
        std::cerr << e.what() << "\n(see '" << hint << "')\n";
        return exit_usage;
    } catch (const std::exception& e) {
        std::cerr << "seqinbox " << name << ": error: " << e.what() << '\n';
        return exit_check_failed;
    }
}
