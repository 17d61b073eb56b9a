#pragma once
// Private to seqinbox::postgresql: opening SOCI sessions and turning SOCI errors into
// seqinbox::error, so that no SOCI type reaches a public header or a caller.
#include <memory>
#include <string>
#include <string_view>

#include <soci/soci.h>

namespace seqinbox::postgresql::detail {

/// A session on `conninfo`, with the session time zone set to UTC (SOCI's std::tm has no offset)
/// and notices silenced.
/// Throws seqinbox::error(connection) naming the redacted conninfo and the fix.
std::unique_ptr<soci::session> connect(const std::string& conninfo);

/// Rethrows a SOCI error as seqinbox::error: connection (class 08, 57P01..57P03, and
/// 25006: a read-only server, a standby), retryable
/// (lock timeout 55P03, serialization 40001, deadlock 40P01, statement cancel 57014), otherwise
/// internal; with the SQLSTATE. `doing` says what failed ("applying schema V2 ...").
[[noreturn]] void rethrow(const soci::soci_error& e, std::string_view doing, std::string_view conninfo);

}  // namespace seqinbox::postgresql::detail
