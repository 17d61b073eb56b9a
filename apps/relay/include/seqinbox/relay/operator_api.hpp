#pragma once
// The operator HTTP API and web console (docs/operator-api.md) over a store with views and
// actions: what `seqinbox status`, `sequences`, `show` and the action subcommands do, as JSON
// under /api/v1, and the console page at /. Requests write pending actions; the service's
// pending-action job executes them. Access: seqinbox/relay/http_access.hpp.
//
// Thread safety: operator() may be called concurrently when the store's views and requests may.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/relay/console_page.hpp"
#include "seqinbox/relay/detail/operator_json.hpp"
#include "seqinbox/relay/http_access.hpp"
#include "seqinbox/relay/http_endpoint.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/views.hpp"

namespace seqinbox::relay {

struct operator_api_options {
    /// Share of the retention after which an OPEN instance is listed as expiring (query `share`).
    double expiring_share = 0.75;
    /// The time ages and retention are measured at.
    std::function<timestamp()> now = [] { return std::chrono::system_clock::now(); };
    /// Action requests handled at once; another gets 503 at once. A request on a row a delivery
    /// holds waits up to the store's request lock timeout (2 s): without a bound, a burst of them
    /// would take every serving thread from the views. At least 1.
    unsigned max_action_requests = 2;
    /// The declared numbering of a sequence (the relay knows its declarations): an instance
    /// view's missing numbers then start at the declared first number. Empty (`seqinbox serve`):
    /// an instance holding numbers is numbered, and its missing numbers start at its first waiting one.
    detail::declared_numbering numbering{};
};

template <class S>
    requires view_store<S> && action_store<S>
class operator_api {
public:
    operator_api(S& store, http_access access, operator_api_options options = {})
        : store_(store), access_(std::move(access)), options_(std::move(options)) {}

    /// Answers a request to / (the console) or /api/v1/...; anything else is 404.
    http_response operator()(const http_request& r) const {
        if (r.path == "/" || r.path == "/index.html") return r.method == "GET" ? console() : not_allowed("GET");
        if (!r.path.starts_with(prefix)) return detail::error_response(404, "no such path: '" + r.path + "'");
        try {
            return api(r, split(std::string_view(r.path).substr(prefix.size())));
        } catch (const detail::api_refusal& e) {
            return detail::error_response(e.status(), e.what());
        } catch (const error& e) {
            return store_failure(e);
        }
    }

private:
    static constexpr std::string_view prefix = "/api/v1/";
    using segments = std::vector<std::string_view>;

    static segments split(std::string_view rest) {
        segments parts;
        while (!rest.empty()) {
            const auto slash = rest.find('/');
            parts.push_back(rest.substr(0, slash));
            rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
        }
        return parts;
    }

    static http_response console() {
        return {200, "text/html; charset=utf-8", std::string(console_page()),
                {{"Cache-Control", "no-store"}, {"X-Content-Type-Options", "nosniff"}, {"X-Frame-Options", "DENY"},
                 {"Referrer-Policy", "no-referrer"}}};
    }

    /// 503 with Retry-After for what passes (the database unreachable, a row a delivery holds:
    /// request_locked), 500 for the rest.
    static http_response store_failure(const error& e) {
        const bool passing = e.category() == error_category::connection || e.category() == error_category::retryable;
        std::string reason = std::string(to_string(e.category())) + ": " + e.what();
        return passing ? retry_later(std::move(reason)) : detail::error_response(500, reason);
    }

    /// 503 for what passes, with the Retry-After every such answer of the API carries.
    static http_response retry_later(std::string reason) {
        auto response = detail::error_response(503, reason);
        response.headers.emplace_back("Retry-After", "2");
        return response;
    }

    /// Counts an action request in `running` while it lives.
    struct action_slot {
        explicit action_slot(std::atomic<unsigned>& count) : counter(count), running(++count) {}
        ~action_slot() { --counter; }
        action_slot(const action_slot&) = delete;
        action_slot& operator=(const action_slot&) = delete;
        std::atomic<unsigned>& counter;
        unsigned running;  ///< this one included
    };

    static http_response too_many_actions(unsigned running) {
        return retry_later(std::to_string(running) + " action requests are being handled already; try again");
    }

    static http_response not_allowed(std::string_view allowed) {
        auto response = detail::error_response(405, "this path takes " + std::string(allowed));
        response.headers.emplace_back("Allow", allowed);
        return response;
    }

    static http_response refused(const access_refusal& why) {
        auto response = detail::error_response(why.status, why.reason);
        if (why.status == 401) response.headers.emplace_back("WWW-Authenticate", "Bearer");
        return response;
    }

    http_response api(const http_request& r, const segments& path) const {
        const bool write = path.size() == 2 && path[1] == "actions";
        if (write) {
            if (r.method != "POST") return not_allowed("POST");
            if (auto why = access_.refuse_write(r)) return refused(*why);
            const action_slot slot(actions_running_);
            if (slot.running > std::max(options_.max_action_requests, 1u)) return too_many_actions(slot.running - 1);
            return path[0] == "messages" ? message_action(r) : path[0] == "instances" ? instance_action(r) : no_such_path(r);
        }
        if (auto why = access_.refuse_view(r)) return refused(*why);
        if (r.method != "GET") return known(path) ? not_allowed("GET") : no_such_path(r);
        return view(r, path);
    }

    static bool known(const segments& path) { return !path.empty() && (path[0] == "instances" || path[0] == "messages" || path[0] == "counts" || path[0] == "whoami"); }

    static http_response no_such_path(const http_request& r) { return detail::error_response(404, "no such path: '" + r.path + "'"); }

    http_response view(const http_request& r, const segments& path) const {
        const auto now = options_.now();
        const auto ok = [](const detail::json& body) { return detail::json_response(200, body); };
        if (path.size() == 1 && path[0] == "whoami")
            return ok({{"role", to_string(access_.role_of(r))}, {"views_open", access_.views_open()}, {"writes_enabled", access_.writes_enabled()}});
        if (path.size() == 1 && path[0] == "counts") return ok(detail::counts_json(store_.instance_counts(), store_.message_counts()));
        if (path.size() == 1 && path[0] == "instances") return instance_by_name(r, now);
        if (path.size() == 1 && path[0] == "messages") return message_by_key(r, now);
        if (path.size() == 2 && path[0] == "instances") return instance_list(r, path[1], now);
        if (path.size() == 2 && path[0] == "messages") return found(store_.find_message(detail::id_segment(path[1], "message")), "message " + std::string(path[1]), now);
        return no_such_path(r);
    }

    http_response instance_list(const http_request& r, std::string_view which, timestamp now) const {
        if (which != "expired" && which != "expiring" && which != "waiting") return instance_by_id(r, which, now);
        const auto limit = detail::limit_parameter(r);
        if (which == "expired") return detail::json_response(200, detail::page_json(store_.expired_instances(now, limit, detail::after_parameter(r)), limit, now));
        if (which == "expiring") {
            const auto share = detail::share_parameter(r, options_.expiring_share);
            return detail::json_response(200, detail::page_json(store_.expiring_instances(now, share, limit, detail::after_parameter(r)), limit, now));
        }
        return detail::json_response(200, detail::waiting_json(store_.waiting_longest(limit), now));
    }

    /// An instance with one page of its messages: the answer's size does not grow with the instance.
    http_response instance_by_id(const http_request& r, std::string_view id, timestamp now) const {
        const auto instance = detail::id_segment(id, "instance");
        return found(store_.view_instance(instance, detail::message_page_parameters(r)), "instance " + std::string(id), now);
    }

    http_response instance_by_name(const http_request& r, timestamp now) const {
        const auto names = detail::required_parameters(r, {"sequence", "context_id"});
        const auto page = detail::message_page_parameters(r);
        return found(store_.view_instance(names[0], names[1], page), "instance of sequence '" + names[0] + "' for context id '" + names[1] + "'", now);
    }

    http_response message_by_key(const http_request& r, timestamp now) const {
        const auto names = detail::required_parameters(r, {"type", "idempotence_id"});
        return found(store_.find_message(claim_key{names[0], names[1]}), "message of type '" + names[0] + "' with idempotence id '" + names[1] + "'", now);
    }

    http_response found(const std::optional<instance_view>& v, const std::string& what, timestamp now) const {
        return v ? detail::json_response(200, detail::instance_view_json(*v, now, options_.numbering)) : detail::error_response(404, "no " + what);
    }
    static http_response found(const std::optional<message_view>& v, const std::string& what, timestamp now) {
        return v ? detail::json_response(200, detail::message_view_json(*v, now)) : detail::error_response(404, "no " + what);
    }

    http_response message_action(const http_request& r) const {
        const auto request = detail::message_action_body(r.body);
        auto id = std::get_if<std::int64_t>(&request.target) ? std::get<std::int64_t>(request.target) : message_id{0};
        std::string target = "message " + std::to_string(id);
        if (const auto* key = std::get_if<std::pair<std::string, std::string>>(&request.target)) {
            target = "message of type '" + key->first + "' with idempotence id '" + key->second + "'";
            const auto found = store_.find_message(claim_key{key->first, key->second});
            if (!found) return detail::error_response(404, "no " + target);
            id = found->message.id;
        }
        return requested(store_.request_message_action(id, request.action, options_.now()), to_string(request.action), "message", id, target);
    }

    http_response instance_action(const http_request& r) const {
        const auto request = detail::instance_action_body(r.body);
        auto id = std::get_if<std::int64_t>(&request.target) ? std::get<std::int64_t>(request.target) : instance_id{0};
        std::string target = "instance " + std::to_string(id);
        if (const auto* names = std::get_if<std::pair<std::string, std::string>>(&request.target)) {
            target = "instance of sequence '" + names->first + "' for context id '" + names->second + "'";
            const auto found = store_.view_instance(names->first, names->second, {.limit = 1});  // for its id only
            if (!found) return detail::error_response(404, "no " + target);
            id = found->instance.id;
        }
        return requested(store_.request_instance_action(id, request.action, options_.now()), to_string(request.action), "instance", id, target);
    }

    static http_response requested(request_outcome outcome, std::string_view action, const char* kind, std::int64_t id, const std::string& target) {
        if (accepted(outcome)) return detail::json_response(202, {{"requested", action}, {kind, id}});
        return detail::error_response(outcome == request_outcome::not_found ? 404 : 409, refusal_text(outcome, target));
    }

    S& store_;
    http_access access_;
    operator_api_options options_;
    mutable std::atomic<unsigned> actions_running_{0};
};

}  // namespace seqinbox::relay
