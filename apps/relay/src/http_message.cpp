#include "http_message.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "seqinbox/error.hpp"

namespace seqinbox::relay {

namespace detail {

namespace {

std::string_view reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::ranges::transform(out, out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// `s` percent-decoded, '+' as a space; a malformed escape stays as it is.
std::string percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') out += ' ';
        else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else out += s[i];
    }
    return out;
}

}  // namespace

std::optional<in_addr> ipv4_of(const std::string& host) {
    in_addr address{};
    if (::inet_pton(AF_INET, host.c_str(), &address) != 1) return std::nullopt;
    return address;
}

std::string render(const http_response& r, bool with_body) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(reason_phrase(r.status)) +
                      "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                      "\r\nConnection: close\r\n";
    for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
    out += "\r\n";
    if (with_body) out += r.body;
    return out;
}

http_response text(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body), {}}; }

std::optional<header_list> headers_of(std::string_view head) {
    const auto request_line_end = head.find("\r\n");
    head = request_line_end == std::string_view::npos ? std::string_view() : head.substr(request_line_end + 2);
    header_list headers;
    while (!head.empty()) {
        const auto end = head.find("\r\n");
        const auto line = head.substr(0, end);
        head = end == std::string_view::npos ? std::string_view() : head.substr(end + 2);
        if (line.empty()) continue;
        const auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return std::nullopt;
        headers.emplace_back(lower(trimmed(line.substr(0, colon))), std::string(trimmed(line.substr(colon + 1))));
    }
    return headers;
}

std::optional<std::size_t> content_length(const header_list& headers) {
    std::optional<std::size_t> found;
    for (const auto& [name, value] : headers) {
        if (name != "content-length") continue;
        std::size_t length = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (ec != std::errc{} || end != value.data() + value.size() || found) return std::nullopt;
        found = length;
    }
    return found.value_or(0);
}

bool chunked(const header_list& headers) {
    return std::ranges::any_of(headers, [](const auto& h) { return h.first == "transfer-encoding"; });
}

std::variant<http_request, http_response> parsed(const std::string& raw) {
    const auto head_end = raw.find("\r\n\r\n");
    const std::string_view head = std::string_view(raw).substr(0, head_end);
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const auto first_space = line.find(' ');
    const auto second_space = line.find(' ', first_space == std::string_view::npos ? line.size() : first_space + 1);
    if (first_space == std::string_view::npos || second_space == std::string_view::npos) return text(400, "malformed request line\n");
    auto headers = headers_of(head);
    if (!headers) return text(400, "malformed header line\n");
    http_request r;
    r.method = std::string(line.substr(0, first_space));
    const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    const auto question = target.find('?');
    r.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) r.query = std::string(target.substr(question + 1));
    r.body = raw.substr(head_end + 4, content_length(*headers).value_or(0));  // bytes after the body are not part of it
    r.headers = std::move(*headers);
    return r;
}

}  // namespace detail

std::optional<std::string_view> http_request::header(std::string_view name) const {
    for (const auto& [n, value] : headers)
        if (n == name) return value;
    return std::nullopt;
}

std::optional<std::string> http_request::parameter(std::string_view name) const {
    for (std::string_view rest = query; !rest.empty();) {
        const auto amp = rest.find('&');
        const auto pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        const auto equals = pair.find('=');
        if (detail::percent_decoded(pair.substr(0, equals)) == name)
            return equals == std::string_view::npos ? std::string() : detail::percent_decoded(pair.substr(equals + 1));
    }
    return std::nullopt;
}

void http_address::check() const {
    if (!detail::ipv4_of(host))
        throw error(error_category::configuration,
                    "http endpoint: '" + host + "' is not an IPv4 address such as 127.0.0.1 or 0.0.0.0");
}

bool http_address::loopback() const {
    const auto address = detail::ipv4_of(host);
    return address && (ntohl(address->s_addr) >> 24) == 127;
}

}  // namespace seqinbox::relay
