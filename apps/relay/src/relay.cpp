#include "seqinbox/relay/relay.hpp"

#include <memory>
#include <string>
#include <utility>

#include "relay_parts.hpp"

namespace seqinbox::relay {

namespace {

/// The relay on the store the connection string names: a MariaDB URL or a libpq conninfo.
std::unique_ptr<detail::relay_service> open_relay(relay_options options, std::ostream& log) {
    if (options.conninfo.starts_with("mariadb://")) {
#ifdef SEQINBOX_RELAY_HAS_MARIADB
        return detail::mariadb_relay(std::move(options), log);
#else
        detail::misconfigured("a mariadb:// connection string needs the MariaDB store, which this build lacks (SOCI's MySQL backend)");
#endif
    }
    return detail::postgresql_relay(std::move(options), log);
}

}  // namespace

std::string output_topic_of(const relay_options& options, const std::string& sequence) {
    const auto it = options.output_topics.find(sequence);
    return it != options.output_topics.end() ? it->second : options.output_prefix + sequence;
}

relay::relay(relay_options options, std::ostream& log) : impl_(open_relay(std::move(options), log)) {}
relay::~relay() = default;

void relay::start() { impl_->start(); }
void relay::stop() { impl_->stop(); }
std::uint16_t relay::http_port() const noexcept { return impl_->http_port(); }
std::pair<bool, std::string> relay::health() const { return impl_->health(); }

}  // namespace seqinbox::relay
