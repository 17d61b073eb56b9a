#include "seqinbox/relay/http_access.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace {

[[noreturn]] void bad_token(const std::string& source, const std::string& problem) {
    throw error(error_category::configuration, "operator API: the token in " + source + " " + problem);
}

std::string_view trimmed(std::string_view s) {
    const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!s.empty() && blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    return s;
}

std::string checked(std::string_view text, const std::string& source) {
    const auto token = trimmed(text);
    if (token.size() < min_token_length)
        bad_token(source, "has " + std::to_string(token.size()) + " characters; give at least " + std::to_string(min_token_length) +
                              " (e.g. head -c 32 /dev/urandom | base64)");
    if (std::ranges::any_of(token, [](unsigned char c) { return c <= ' ' || c == 0x7f; }))
        bad_token(source, "holds white space or control characters");
    return std::string(token);
}

std::optional<std::string> token_from(const std::optional<std::filesystem::path>& file, const char* variable) {
    if (file) {
        std::ifstream in(*file);
        std::string line;
        if (!in || !std::getline(in, line)) bad_token("file '" + file->string() + "'", "cannot be read");
        return checked(line, "file '" + file->string() + "'");
    }
    if (const char* value = std::getenv(variable)) return checked(value, "environment variable " + std::string(variable));
    return std::nullopt;
}

/// Equal contents, in a time that depends on the expected token's length only.
bool same_token(std::string_view given, std::string_view expected) {
    unsigned char differs = given.size() == expected.size() ? 0 : 1;
    for (std::size_t i = 0; i < expected.size(); ++i)
        differs |= static_cast<unsigned char>(expected[i] ^ (given.empty() ? 0 : given[i % given.size()]));
    return differs == 0;
}

/// The host of a Host header value: without the port, and without the brackets of an IPv6 address.
std::string_view host_name(std::string_view host) {
    if (host.starts_with('[')) return host.substr(1, host.find(']') - 1);
    return host.substr(0, host.rfind(':'));
}

bool loopback_name(std::string_view host) {
    const auto name = host_name(host);
    return name == "localhost" || name == "::1" || http_address{.host = std::string(name), .port = 0}.loopback();
}

}  // namespace

access_tokens read_access_tokens(const std::optional<std::filesystem::path>& view_file,
                                 const std::optional<std::filesystem::path>& write_file) {
    access_tokens tokens{token_from(view_file, view_token_variable), token_from(write_file, write_token_variable)};
    if (tokens.view && tokens.write && *tokens.view == *tokens.write)
        throw error(error_category::configuration, "operator API: the view and write tokens are the same; give each role its own");
    return tokens;
}

http_access::http_access(access_tokens tokens, const http_address& where) : tokens_(std::move(tokens)) {
    where.check();
    if (!tokens_.view && !where.loopback())
        throw error(error_category::configuration, "operator API: refusing to listen on " + where.host +
                                                       " without a view token: anybody who reaches it could read the inbox; give "
                                                       "--view-token-file (or " + view_token_variable + ") or a loopback address");
}

std::optional<std::string_view> http_access::presented(const http_request& request) const {
    const auto header = request.header("authorization");
    if (!header) return std::nullopt;
    constexpr std::string_view scheme = "Bearer ";
    if (header->size() < scheme.size() || !std::ranges::equal(header->substr(0, scheme.size()), scheme, [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
        return std::string_view();  // presented, but not a bearer token: matches nothing
    return trimmed(header->substr(scheme.size()));
}

access_role http_access::role_of(const http_request& request) const {
    const auto token = presented(request);
    if (!token) return access_role::none;
    // both compared, so that the time does not tell which role a token nearly matched
    const bool write = tokens_.write && same_token(*token, *tokens_.write);
    const bool view = tokens_.view && same_token(*token, *tokens_.view);
    return write ? access_role::write : view ? access_role::view : access_role::none;
}

std::optional<access_refusal> http_access::refuse_view(const http_request& request) const {
    const bool has_token = presented(request).has_value();
    if (has_token && role_of(request) == access_role::none) return access_refusal{401, "the bearer token is not valid"};
    if (views_open()) return refuse_host(request);
    if (!has_token) return access_refusal{401, "a bearer token (view or write) is required"};
    return std::nullopt;
}

std::optional<access_refusal> http_access::refuse_probe(const http_request& request) const {
    return views_open() ? refuse_host(request) : std::nullopt;
}

std::optional<access_refusal> http_access::refuse_host(const http_request& request) const {
    const auto host = request.header("host").value_or("");
    if (loopback_name(host)) return std::nullopt;
    return access_refusal{421, "without a view token this endpoint answers only requests addressed to 127.0.0.1 or localhost, not '" +
                                   std::string(host) + "'"};
}

std::optional<access_refusal> http_access::refuse_write(const http_request& request) const {
    if (auto refused = refuse_view(request)) return refused;
    if (!writes_enabled()) return access_refusal{403, "writes are disabled: no write token is configured"};
    switch (role_of(request)) {
    case access_role::write: return std::nullopt;
    case access_role::view: return access_refusal{403, "the view token may not request actions; use the write token"};
    case access_role::none: break;
    }
    return access_refusal{401, "the write token is required"};
}

http_gate probe_gate(const http_access& access) {
    return [access](const http_request& request) -> std::optional<http_response> {
        const auto refused = access.refuse_probe(request);
        if (!refused) return std::nullopt;
        return http_response{refused->status, "text/plain; charset=utf-8", refused->reason + "\n", {}};
    };
}

}  // namespace seqinbox::relay
