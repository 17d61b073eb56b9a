#pragma once
// The HTTP/1.1 messages of seqinbox/relay/http_endpoint.hpp: parsing a request, rendering an
// answer. Private to the endpoint. Pure functions: safe to call from any thread.
#include <netinet/in.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "seqinbox/relay/http_endpoint.hpp"

namespace seqinbox::relay::detail {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// The address in `host`, when it is an IPv4 address in dotted form.
std::optional<in_addr> ipv4_of(const std::string& host);

/// The status line, headers and (unless `with_body` is false, for HEAD) body of `r`.
std::string render(const http_response& r, bool with_body);

/// A plain-text answer.
http_response text(int status, std::string body);

/// The header lines of a request head (after its request line), names trimmed and lower case;
/// none when one is malformed.
std::optional<header_list> headers_of(std::string_view head);

/// Content-Length: 0 without one, none when it is not a number or given twice.
std::optional<std::size_t> content_length(const header_list& headers);

/// Whether a Transfer-Encoding is given (refused: a body needs a Content-Length).
bool chunked(const header_list& headers);

/// The request in `raw` (head and complete body), or the answer refusing it.
std::variant<http_request, http_response> parsed(const std::string& raw);

}  // namespace seqinbox::relay::detail
