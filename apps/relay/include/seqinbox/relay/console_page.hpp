#pragma once
// The web console (apps/relay/console/index.html, embedded at build time): one page, served at /
// by the operator API, that calls /api/v1 with the token the operator types in.
#include <string_view>

namespace seqinbox::relay {

/// The page's HTML.
std::string_view console_page() noexcept;

}  // namespace seqinbox::relay
