// Read views (seqinbox::view_store): counts, expired and expiring instances, one instance with
// a page of its messages and pending actions. Each is autocommitted, or one read-only transaction.
#include <algorithm>
#include <limits>
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
        soci::statement st = detail::prepared(c.site(), sql, soci::into(name), soci::into(state), soci::into(n));
        std::vector<std::tuple<std::string, std::string, std::size_t>> rows;
        detail::for_each_row(st, [&] { rows.emplace_back(name, state, static_cast<std::size_t>(n)); });
        return rows;
    });
}

namespace {

/// The keyset condition of a page after `after` in (retain_until, id) order; none from the start.
std::string after_position(const scan_position& after) {
    if (after == scan_position{}) return {};
    return " AND (retain_until, id) > (" + sql_timestamp(std::to_string(to_microseconds(after.key))) + ", " + std::to_string(after.id) + ")";
}

}  // namespace

std::vector<sequence_instance> store::expired_instances(timestamp now, std::size_t limit, const scan_position& after) {
    return instances_where("finding expired instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until < " +
                               sql_timestamp(":now") + after_position(after) + " ORDER BY retain_until, id LIMIT :limit",
                           limit, to_microseconds(now));
}

std::vector<sequence_instance> store::expiring_instances(timestamp now, double share, std::size_t limit, const scan_position& after) {
    const long long at = to_microseconds(now);
    return instances_where("finding expiring instances",
                           "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE state = 'OPEN' AND retain_until >= " +
                               sql_timestamp(":now") + " AND created_at + (retain_until - created_at) * :share <= " +
                               sql_timestamp(":now_again") + after_position(after) + " ORDER BY retain_until, id LIMIT :limit",
                           limit, at, share, at);
}

std::vector<waiting_instance> store::waiting_longest(std::size_t limit) {
    return autocommitted("finding the instances waiting longest", [&](detail::connection& c) {
        detail::instance_columns row;
        long long oldest = 0, waiting = 0;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared_with(
            c.site(),
            "SELECT " + detail::instance_columns_sql() + ", " + detail::sql_microseconds("w.oldest") +
                ", w.waiting FROM (SELECT sequence_instance_id, min(created_at) AS oldest, count(*) AS waiting FROM sequenced_message"
                " WHERE state = 'WAITING' GROUP BY sequence_instance_id ORDER BY 2, 1 LIMIT :limit) w"
                " JOIN sequence_instance i ON i.id = w.sequence_instance_id ORDER BY w.oldest, i.id",
            std::tuple_cat(detail::into_instance(row), std::tuple{soci::into(oldest), soci::into(waiting)}), soci::use(max_rows));
        std::vector<waiting_instance> rows;
        detail::for_each_row(st, [&] { rows.push_back({detail::to_instance(row), from_microseconds(oldest), static_cast<std::size_t>(waiting)}); });
        return rows;
    });
}

std::vector<retention_count> store::retention_counts(timestamp now, double share) {
    return autocommitted("counting expiring and expired instances", [&](detail::connection& c) {
        std::string name;
        long long expiring = 0, expired = 0;
        const long long at = to_microseconds(now);
        soci::statement st = detail::prepared(
            c.site(),
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

std::optional<instance_view> store::view_instance(const std::string& sequence, const std::string& context_id, const message_page& page) {
    check_page(page);
    auto tx = begin();
    const auto instance = one_instance(tx, "reading an instance", "name = :name AND context_id = :context_id", sequence, context_id);
    return instance ? view_of(tx, *instance, page) : std::nullopt;
}

std::optional<instance_view> store::view_instance(instance_id id, const message_page& page) {
    check_page(page);
    auto tx = begin();
    const long long key = id;
    const auto instance = one_instance(tx, "reading an instance", "id = :id", key);
    return instance ? view_of(tx, *instance, page) : std::nullopt;
}

namespace {

/// The columns of a message row without its record, its pending request, and the into elements
/// receiving them.
struct message_columns {
    long long id = 0, instance = 0, created = 0, changed = 0, requested = 0, number = 0;
    message_record row;
    std::string state, action;
    soci::indicator action_null = soci::i_null, requested_null = soci::i_null, number_null = soci::i_null;

    static std::string select_list() {
        return "id, sequence_instance_id, message_type, idempotence_id, state, " + detail::sql_microseconds("created_at") + ", " +
               detail::sql_microseconds("state_changed_at") + ", pending_action, " + detail::sql_microseconds("pending_action_requested_at") +
               ", sequence_number";
    }
    auto into() {
        return std::tuple{soci::into(id),      soci::into(instance), soci::into(row.type), soci::into(row.idempotence_id),
                          soci::into(state),   soci::into(created),  soci::into(changed),  soci::into(action, action_null),
                          soci::into(requested, requested_null), soci::into(number, number_null)};
    }
    message_record record() const {
        message_record r = row;
        r.id = id;
        r.instance = instance;
        r.state = detail::parse_message_state(state);
        r.created_at = from_microseconds(created);
        r.state_changed_at = from_microseconds(changed);
        if (number_null == soci::i_ok) r.number = number;
        return r;
    }
    std::optional<message_request> pending() const {
        if (action_null != soci::i_ok) return std::nullopt;
        return message_request{id, detail::parse_message_action(action), from_microseconds(requested)};
    }
};

/// The rows a page reads: one more than it holds, to tell whether another page follows.
long long rows_to_read(const message_page& page) {
    constexpr auto most = static_cast<std::size_t>(std::numeric_limits<long long>::max() - 1);
    return static_cast<long long>(std::min(page.limit, most)) + 1;
}

}  // namespace

// Both reads in one round trip; for an instance without numbered rows, two probes of empty index ranges.
numbered_progress store::numbered_progress_of(transaction& tx, instance_id instance) {
    std::size_t last = 0, waiting = 0;
    const auto answers = batch_in(tx, "reading where a numbered instance stands", [&](detail::pipeline& batch) {
        last = batch.statement(detail::last_released_number_sql(), {std::to_string(instance)});
        waiting = batch.statement(detail::waiting_numbers_sql(), {std::to_string(instance), std::to_string(max_waiting_numbers_shown)});
    });
    numbered_progress progress{detail::number_or_null(answers[last], 0, 0), {}};
    for (int i = 0; i < answers[waiting].rows(); ++i) progress.waiting.push_back(answers[waiting].number(i, 0));
    return progress;
}

std::optional<instance_view> store::view_of(transaction& tx, const sequence_instance& instance, const message_page& page) {
    std::optional<instance_view> view = instance_view{instance, {}, {}, std::nullopt, {}};
    const long long id = instance.id, after = page.after, rows = rows_to_read(page);
    // `id + 0`: ordered by the primary key, the planner may walk it from `after` filtering on the
    // instance, and that walk reaches the end of the table when the instance's last messages are
    // older than most rows (its last page). A top-N sort of what the instance index or the id
    // range finds costs at most the instance's rows, in the memory of one page.
    run_in(tx, "reading a page of an instance's messages", [&](detail::connection& c) {
        message_columns columns;
        soci::statement st = detail::prepared_with(
            c.site(),
            "SELECT " + message_columns::select_list() +
                " FROM sequenced_message WHERE sequence_instance_id = :id AND id > :after ORDER BY id + 0 LIMIT :rows",
            columns.into(), soci::use(id), soci::use(after), soci::use(rows));
        detail::for_each_row(st, [&] {
            view->messages.push_back(columns.record());
            if (auto request = columns.pending()) view->actions.on_messages.push_back(*request);
        });
    });
    if (view->messages.size() > page.limit) {
        const auto& beyond = view->messages.back();
        if (!view->actions.on_messages.empty() && view->actions.on_messages.back().message == beyond.id) view->actions.on_messages.pop_back();
        view->messages.pop_back();
        view->next = view->messages.back().id;
    }
    run_in(tx, "counting the messages of an instance", [&](detail::connection& c) {
        std::string state;
        long long n = 0;
        soci::statement st = detail::prepared(c.site(), "SELECT state, count(*) FROM sequenced_message WHERE sequence_instance_id = :id GROUP BY state",
                                              soci::into(state), soci::into(n), soci::use(id));
        detail::for_each_row(st, [&] { view->counts[detail::parse_message_state(state)] = static_cast<std::size_t>(n); });
    });
    view->numbering = numbered_progress_of(tx, id);
    run_in(tx, "reading an instance's pending action", [&](detail::connection& c) {
        std::string action;
        long long at = 0;
        soci::statement st = detail::prepared(c.site(),
                                              "SELECT pending_action, " + detail::sql_microseconds("pending_action_requested_at") +
                                                  " FROM sequence_instance WHERE id = :id AND pending_action IS NOT NULL",
                                              soci::into(action), soci::into(at), soci::use(id));
        if (st.execute(true)) view->actions.on_instance = instance_request{detail::parse_instance_action(action), from_microseconds(at)};
    });
    tx.commit();
    return view;
}

std::optional<message_view> store::find_message(message_id id) {
    const long long key = id;
    return message_where("id = :id", key);
}

std::optional<message_view> store::find_message(const claim_key& key) {
    return message_where("message_type = :type AND idempotence_id = :idempotence_id ORDER BY id DESC LIMIT 1", key.type, key.idempotence_id);
}

template <class... Keys>
std::optional<message_view> store::message_where(const std::string& where, const Keys&... keys) {
    auto tx = begin();
    std::optional<message_record> message;
    std::optional<message_request> pending;
    run_in(tx, "reading a message", [&](detail::connection& c) {
        message_columns columns;
        soci::statement st = detail::prepared_with(c.site(), "SELECT " + message_columns::select_list() + " FROM sequenced_message WHERE " + where,
                                                   columns.into(), soci::use(keys)...);
        if (st.execute(true)) {
            message = columns.record();
            pending = columns.pending();
        }
    });
    if (!message) return std::nullopt;
    const long long instance_key = message->instance;
    const auto instance = one_instance(tx, "reading a message's instance", "id = :id", instance_key);
    tx.commit();
    if (!instance) return std::nullopt;  // cannot happen: the foreign key keeps the instance while the message exists
    return message_view{std::move(*message), *instance, pending};
}

}  // namespace seqinbox::postgresql
