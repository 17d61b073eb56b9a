// seqinbox serve: see serve.hpp.
#include "serve.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <type_traits>

#include "database_flag.hpp"
#include "open_store.hpp"
#include "options.hpp"
#include "pooler_flag.hpp"
#include "service_flags.hpp"
#include "stop_signals.hpp"
#include "seqinbox/logger/stream_logger.hpp"
#include "seqinbox/relay/http_endpoint.hpp"
#include "seqinbox/relay/operator_api.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::uint16_t default_port = 9465;

constexpr std::string_view usage_text =
    "usage: seqinbox serve --postgres CONNINFO [options]\n"
    "       seqinbox serve --database mariadb://USER:PASSWORD@HOST:PORT/DATABASE [options]\n"
    "\n"
    "The operator API (/api/v1) and web console (/) of an inbox database, for services that embed\n"
    "the library (the relay serves them itself): views of instances and messages, and requests of\n"
    "CONSUME, EXPIRE, CONSUME_ALL, CLOSE and SKIP_GAP, which the service's pending-action job executes.\n"
    "Also /healthz. Stops on SIGTERM or SIGINT.\n"
    "\n"
    "options:\n"
    SEQINBOX_DATABASE_FLAG_HELP
    SEQINBOX_POOLER_FLAG_HELP
    "  --expiring-share S        share of the retention after which an OPEN instance is listed as\n"
    "                            expiring (default 0.75)\n";

constexpr std::string_view exit_text =
    "\n"
    "exit status: 0 stopped on SIGTERM or SIGINT, 1 could not start (reason on stderr), 2 usage error\n";

struct serve_call {
    std::string conninfo;
    postgresql::pooler pooler = postgresql::pooler::none;
    double expiring_share = 0.75;
    http_flags http;
};

std::optional<serve_call> parse(std::span<const std::string_view> args) {
    serve_call call;
    call.http.port = default_port;
    for (option_reader r(args, "serve"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage_text << http_flags_help(default_port, "the API and console") << exit_text;
            return std::nullopt;
        }
        if (read_database_flag(r, call.conninfo)) continue;
        if (read_pooler_flag(r, call.pooler)) continue;
        else if (auto v = r.value("--expiring-share")) call.expiring_share = r.share("--expiring-share", *v);
        else if (!read_http_flag(r, call.http)) r.unknown();
    }
    require_option("serve", !call.conninfo.empty(), "--postgres");
    return call;
}

}  // namespace

int serve_command(std::span<const std::string_view> args) {
    const auto call = parse(args);
    if (!call) return exit_ok;
    const relay::http_address where{.host = call->http.host, .port = call->http.port};
    relay::http_access access(call->http.tokens(), where);
    const sigset_t signals = block_stop_signals();
    // The endpoint's serving threads: a connection each.
    return on_store(call->conninfo, call->pooler, 4, [&](auto& store) {
        using store_type = std::remove_reference_t<decltype(store)>;
        const bool views_open = access.views_open(), writes = access.writes_enabled();
        auto gate = relay::probe_gate(access);
        relay::operator_api<store_type> api(store, std::move(access), {.expiring_share = call->expiring_share});
        relay::http_endpoint endpoint(
            where, {{"/healthz", [] { return relay::http_response{200, "text/plain; charset=utf-8", "ok\n", {}}; }}},
            [&api](const relay::http_request& r) { return api(r); }, {.fixed_gate = std::move(gate)});
        logger::stream_logger log(std::cerr);
        log.log(log_level::info, "serving the operator API and console on " + where.host + ":" + std::to_string(endpoint.port()) +
                                     " (views " + (views_open ? "open" : "need a token") + ", writes " +
                                     (writes ? "need the write token" : "disabled") + ")");
        const std::string_view received = wait_for_stop_signal(signals);
        log.log(log_level::info, "stopping on " + std::string(received));
        return exit_ok;
    });
}

}  // namespace seqinbox::cli
