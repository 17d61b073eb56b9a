#pragma once
// Who may call the operator API (docs/operator-api.md): two roles, each with a bearer token of
// its own. A view token lets a caller read; a write token lets it read and request actions. A
// token comes from a file or an environment variable, never from the command line (where `ps`
// shows it). Without a view token, views are open to whoever reaches the endpoint, so the
// endpoint must then bind a loopback address, and it answers only requests addressed to a
// loopback name (a page elsewhere that rebinds its DNS name to 127.0.0.1 gets nothing), the
// probes (/healthz, /metrics, which need no token) included. Without a write token nobody can write. Tokens are compared in constant time.
//
// Thread safety: const member functions may be called concurrently.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "seqinbox/relay/http_endpoint.hpp"

namespace seqinbox::relay {

enum class access_role { none, view, write };

constexpr std::string_view to_string(access_role r) noexcept {
    return r == access_role::write ? "write" : r == access_role::view ? "view" : "none";
}

struct access_tokens {
    std::optional<std::string> view;
    std::optional<std::string> write;
};

/// Tokens shorter than this are refused: a bearer token is all that guards the database.
constexpr std::size_t min_token_length = 16;

/// The environment variables read when no token file is given.
constexpr const char* view_token_variable = "SEQINBOX_VIEW_TOKEN";
constexpr const char* write_token_variable = "SEQINBOX_WRITE_TOKEN";

/// Each token from its file (its first line, surrounding white space dropped) if one is given,
/// else from its environment variable if set. Throws seqinbox::error (configuration) naming
/// the file or variable when it cannot be read, is shorter than min_token_length, holds white
/// space or control characters, or when the two tokens are the same.
access_tokens read_access_tokens(const std::optional<std::filesystem::path>& view_file,
                                 const std::optional<std::filesystem::path>& write_file);

/// Why a request is refused: 401 (no valid token), 403 (a role that may not), 421 (not
/// addressed to a loopback name while views are open).
struct access_refusal {
    int status;
    std::string reason;
};

class http_access {
public:
    /// Throws seqinbox::error (configuration) naming `where` when it is not a loopback address
    /// and no view token is given.
    http_access(access_tokens tokens, const http_address& where);

    /// The role the request's `Authorization: Bearer` token gives.
    access_role role_of(const http_request& request) const;
    /// Nothing when the request may read; otherwise why not.
    std::optional<access_refusal> refuse_view(const http_request& request) const;
    /// Nothing when a probe (/healthz, /metrics) may be answered; otherwise why not: without a
    /// view token, the request must be addressed to a loopback name (421), as for views.
    std::optional<access_refusal> refuse_probe(const http_request& request) const;
    /// Nothing when the request may request actions; otherwise why not.
    std::optional<access_refusal> refuse_write(const http_request& request) const;

    bool views_open() const noexcept { return !tokens_.view; }
    bool writes_enabled() const noexcept { return tokens_.write.has_value(); }

private:
    std::optional<access_refusal> refuse_host(const http_request& request) const;
    std::optional<std::string_view> presented(const http_request& request) const;

    access_tokens tokens_;
};

/// The gate of an endpoint's fixed paths (http_endpoint_options::fixed_gate): refuse_probe of
/// `access` (a copy), as a plain-text answer.
http_gate probe_gate(const http_access& access);

}  // namespace seqinbox::relay
