// Private to the relay: the relay service on MariaDB (store_relay.hpp), for a mariadb:// conninfo.
#include "seqinbox/mariadb/inbox.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "store_relay.hpp"

namespace seqinbox::relay::detail {

std::unique_ptr<relay_service> mariadb_relay(relay_options options, std::ostream& log) {
    // PgBouncer is PostgreSQL's: a MariaDB URL with it is a mistake rather than a no-op.
    if (options.pooler != postgresql::pooler::none) misconfigured("--pooler is for PostgreSQL (PgBouncer); a MariaDB URL takes none");
    const auto store_with = [&](std::size_t pool_size) { return mariadb::store_options{.url = options.conninfo, .pool_size = pool_size}; };
    auto consumers = store_with(store_pool_size(options));
    auto api = store_with(api_pool_size);
    return std::make_unique<store_relay<mariadb::store>>(std::move(options), log, std::move(consumers), std::move(api));
}

}  // namespace seqinbox::relay::detail
