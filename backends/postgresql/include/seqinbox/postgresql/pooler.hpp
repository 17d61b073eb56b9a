#pragma once
// What stands between a PostgreSQL store and its server: nothing, or a pooler in transaction mode.
#include <optional>
#include <string_view>

namespace seqinbox::postgresql {

/// What stands between the store and PostgreSQL. `transaction`: a pooler sharing server
/// connections transaction by transaction (PgBouncer's pool_mode = transaction), so the store
/// keeps nothing beyond a transaction: no named prepared statements (each statement is sent
/// unnamed, in the same round trip), no session SET (SET LOCAL at BEGIN), no session advisory
/// lock (the job and migration locks are held by an open transaction in either mode).
enum class pooler { none, transaction };

/// `pooler` from its name in options and configuration ("none", "transaction"); nullopt for any
/// other text.
std::optional<pooler> pooler_named(std::string_view name) noexcept;

}  // namespace seqinbox::postgresql
