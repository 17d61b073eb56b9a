// Private to the relay: the relay service on PostgreSQL (store_relay.hpp).
#include "seqinbox/postgresql/inbox.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "store_relay.hpp"

namespace seqinbox::relay::detail {

std::unique_ptr<relay_service> postgresql_relay(relay_options options, std::ostream& log) {
    const auto store_with = [&](std::size_t pool_size) {
        return postgresql::store_options{.conninfo = options.conninfo, .pool_size = pool_size, .through = options.pooler};
    };
    auto consumers = store_with(store_pool_size(options));
    auto api = store_with(api_pool_size);
    return std::make_unique<store_relay<postgresql::store>>(std::move(options), log, std::move(consumers), std::move(api));
}

}  // namespace seqinbox::relay::detail
