// Read views (seqinbox::view_store): counts, expired and expiring instances, one instance with
// its messages and pending actions. Each is autocommitted, or one read-only transaction.
#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql {

using detail::from_microseconds;
using detail::sql_timestamp;
using detail::to_microseconds;

namespace {

/// Rows (name, state, count) as `Count`s whose `name` member takes the name, by name and state.
template <class Count, class State>
std::vector<Count> as_counts(std::vector<std::tuple<std::string, std::string, std::size_t>> rows, std::string Count::*name,
                             State (*parse)(std::string_view)) {
    std::vector<Count> out;
    for (auto& [key, state, n] : rows) out.push_back({std::move(key), parse(state), n});
    std::ranges::sort(out, {}, [&](const Count& c) { return std::tie(c.*name, c.state); });
    return out;
}

}  // namespace

std::vector<instance_count> store::instance_counts() {
    return as_counts(grouped_counts("counting instances", "SELECT name, state, count(*) FROM sequence_instance GROUP BY name, state"),
                     &instance_count::sequence, detail::parse_instance_state);
}

std::vector<message_count> store::message_counts() {
    return as_counts(grouped_counts("counting messages",
                                    "SELECT message_type, state, count(*) FROM sequenced_message GROUP BY message_type, state"),
                     &message_count::type, detail::parse_message_state);
}

std::vector<std::tuple<std::string, std::string, std::size_t>> store::grouped_counts(std::string_view doing, const std::string& sql) {
    return autocommitted(doing, [&](detail::connection& c) {
        std::string name, state;
        long long n = 0;
        soci::statement st = detail::prepared(c.session(), sql, soci::into(name), soci::into(state), soci::into(n));
        std::vector<std::tuple<std::string, std::string, std::size_t>> rows;
        detail::for_each_row(st, [&] { rows.emplace_back(name, state, static_cast<std::size_t>(n)); });
        return rows;
    });
}

std::vector<sequence_instance> store::expired_instances(timestamp now, std::size_t limit) {
    return instances_where("finding expired instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until < " +
                               sql_timestamp(":now") + " ORDER BY retain_until, id LIMIT :limit",
                           limit, to_microseconds(now));
}

std::vector<sequence_instance> store::expiring_instances(timestamp now, double share, std::size_t limit) {
    const long long at = to_microseconds(now);
    return instances_where("finding expiring instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until >= " +
                               sql_timestamp(":now") + " AND created_at + (retain_until - created_at) * :share <= " +
                               sql_timestamp(":now_again") + " ORDER BY retain_until, id LIMIT :limit",
                           limit, at, share, at);
}

std::vector<retention_count> store::retention_counts(timestamp now, double share) {
    return autocommitted("counting expiring and expired instances", [&](detail::connection& c) {
        std::string name;
        long long expiring = 0, expired = 0;
        const long long at = to_microseconds(now);
        soci::statement st = detail::prepared(
            c.session(),
            "SELECT name, count(*) FILTER (WHERE retain_until >= " + sql_timestamp(":now") +
                " AND created_at + (retain_until - created_at) * :share <= " + sql_timestamp(":now_again") +
                "), count(*) FILTER (WHERE retain_until < " + sql_timestamp(":now_expired") +
                ") FROM sequence_instance WHERE state = 'OPEN' GROUP BY name ORDER BY name",
            soci::into(name), soci::into(expiring), soci::into(expired), soci::use(at), soci::use(share), soci::use(at), soci::use(at));
        std::vector<retention_count> rows;
        detail::for_each_row(st, [&] { rows.push_back({name, static_cast<std::size_t>(expiring), static_cast<std::size_t>(expired)}); });
        return rows;
    });
}

std::optional<instance_view> store::view_instance(const std::string& sequence, const std::string& context_id) {
    auto tx = begin();
    const auto instance = one_instance(tx, "reading an instance", "name = :name AND context_id = :context_id", sequence, context_id);
    if (!instance) return std::nullopt;
    std::optional<instance_view> view = instance_view{*instance, {}, {}};
    const instance_id id = view->instance.id;
    run_in(tx, "reading the messages of an instance", [&](detail::connection& c) {
        message_record row;
        long long message = 0, created = 0, changed = 0;
        std::string message_state_text;
        soci::statement st = detail::prepared(
            c.session(), "SELECT id, message_type, idempotence_id, state, " + detail::sql_microseconds("created_at") + ", " +
                             detail::sql_microseconds("state_changed_at") + " FROM sequenced_message WHERE sequence_instance_id = :id ORDER BY id",
            soci::into(message), soci::into(row.type), soci::into(row.idempotence_id), soci::into(message_state_text), soci::into(created),
            soci::into(changed), soci::use(id));
        detail::for_each_row(st, [&] {
            row.id = message;
            row.instance = id;
            row.state = detail::parse_message_state(message_state_text);
            row.created_at = from_microseconds(created);
            row.state_changed_at = from_microseconds(changed);
            view->messages.push_back(row);
        });
    });
    view->actions = tx.pending_actions(id);
    tx.commit();
    return view;
}

}  // namespace seqinbox::postgresql
