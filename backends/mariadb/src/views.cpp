// Read views (seqinbox::view_store): counts, expired and expiring instances, one instance with a
// page of its messages and pending actions, one message. Plain reads, each autocommitted on one
// leased connection.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "codec.hpp"
#include "connection.hpp"
#include "numbered_reads.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::mariadb {

using detail::message_column_count;
using detail::microseconds_of;
using detail::number_at;
using detail::parse_instance_action;
using detail::text_at;

namespace {

std::string number_text(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

std::string us(timestamp t) { return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count()); }

/// The keyset condition of a page after `after` in (retain_until, id) order; none from the start.
std::string after_position(const scan_position& after) {
    if (after == scan_position{}) return {};
    const std::string at = detail::time_literal(after.key), id = std::to_string(after.id);
    return " AND (i.retain_until > " + at + " OR (i.retain_until = " + at + " AND i.id > " + id + "))";
}

/// OPEN instances that used `share` of their retention at `now` but not all of it.
std::string expiring_condition(timestamp now, double share) {
    return "i.retain_until >= " + detail::time_literal(now) + " AND " + microseconds_of("i.created_at") + " + (" +
           microseconds_of("i.retain_until") + " - " + microseconds_of("i.created_at") + ") * " + number_text(share) + " <= " + us(now);
}

std::string limited(std::size_t limit) {
    return std::to_string(std::min<std::size_t>(limit, static_cast<std::size_t>(std::numeric_limits<long long>::max())));
}

message_action parse_message_action(std::string_view s) { return s == "CONSUME" ? message_action::consume : message_action::expire; }

/// A message row with its pending request: message_columns() then the action and its time.
std::string message_with_request_columns() {
    return detail::message_columns() + ", m.pending_action, " + microseconds_of("m.pending_action_requested_at");
}

std::optional<message_request> request_at(const detail::row& row, const message_record& m, std::size_t first) {
    if (detail::null_at(row, first)) return std::nullopt;
    return message_request{m.id, parse_message_action(text_at(row, first)), detail::from_microseconds(number_at(row, first + 1))};
}

/// Where a numbered instance stands (empty for another): two reads of V4's index.
numbered_progress numbering_of(detail::connection& c, instance_id instance) {
    numbered_progress progress;
    c.rows(detail::last_released_sql(instance), [&](const detail::row& r) { progress.last_released = detail::released_at(r); });
    c.rows(detail::waiting_numbers_sql(instance, max_waiting_numbers_shown),
           [&](const detail::row& r) { progress.waiting.push_back(number_at(r, 0)); });
    return progress;
}

}  // namespace

std::vector<instance_count> store::instance_counts() {
    return detail::autocommitted(*pool_, "counting instances", [&](detail::connection& c) {
        std::vector<instance_count> out;
        c.rows("SELECT name, state, count(*) FROM sequence_instance GROUP BY name, state ORDER BY name, state = 'CLOSED'",
               [&](const detail::row& r) {
                   out.push_back({text_at(r, 0), text_at(r, 1) == "CLOSED" ? instance_state::closed : instance_state::open,
                                  static_cast<std::size_t>(number_at(r, 2))});
               });
        return out;
    });
}

std::vector<message_count> store::message_counts() {
    auto out = detail::autocommitted(*pool_, "counting messages", [&](detail::connection& c) {
        std::vector<message_count> rows;
        c.rows("SELECT message_type, state, count(*) FROM sequenced_message GROUP BY message_type, state", [&](const detail::row& r) {
            rows.push_back({text_at(r, 0), detail::parse_message_state(text_at(r, 1)), static_cast<std::size_t>(number_at(r, 2))});
        });
        return rows;
    });
    std::ranges::sort(out, {}, [](const message_count& c) { return std::tie(c.type, c.state); });
    return out;
}

std::vector<sequence_instance> store::instances_where(std::string_view doing, const std::string& where_and_order, std::size_t limit) {
    return detail::autocommitted(*pool_, doing, [&](detail::connection& c) {
        std::vector<sequence_instance> out;
        c.rows("SELECT " + detail::instance_columns() + " FROM sequence_instance i WHERE " + where_and_order + " LIMIT " + limited(limit),
               [&](const detail::row& r) { out.push_back(detail::instance_at(r)); });
        return out;
    });
}

std::vector<sequence_instance> store::expired_instances(timestamp now, std::size_t limit, const scan_position& after) {
    return instances_where("finding expired instances",
                           "i.state = 'OPEN' AND i.retain_until < " + detail::time_literal(now) + after_position(after) +
                               " ORDER BY i.retain_until, i.id",
                           limit);
}

std::vector<sequence_instance> store::expiring_instances(timestamp now, double share, std::size_t limit, const scan_position& after) {
    return instances_where("finding expiring instances",
                           "i.state = 'OPEN' AND " + expiring_condition(now, share) + after_position(after) + " ORDER BY i.retain_until, i.id",
                           limit);
}

std::vector<waiting_instance> store::waiting_longest(std::size_t limit) {
    return detail::autocommitted(*pool_, "finding the instances waiting longest", [&](detail::connection& c) {
        std::vector<waiting_instance> out;
        c.rows("SELECT " + detail::instance_columns() + ", " + microseconds_of("w.oldest") +
                   ", w.waiting FROM (SELECT sequence_instance_id, min(created_at) AS oldest, count(*) AS waiting FROM sequenced_message"
                   " WHERE state = 'WAITING' GROUP BY sequence_instance_id ORDER BY 2, 1 LIMIT " + limited(limit) +
                   ") w JOIN sequence_instance i ON i.id = w.sequence_instance_id ORDER BY w.oldest, i.id",
               [&](const detail::row& r) {
                   out.push_back({detail::instance_at(r), detail::from_microseconds(number_at(r, detail::instance_column_count)),
                                  static_cast<std::size_t>(number_at(r, detail::instance_column_count + 1))});
               });
        return out;
    });
}

std::vector<retention_count> store::retention_counts(timestamp now, double share) {
    return detail::autocommitted(*pool_, "counting expiring and expired instances", [&](detail::connection& c) {
        std::vector<retention_count> out;
        c.rows("SELECT i.name, CAST(SUM(" + expiring_condition(now, share) + ") AS SIGNED), CAST(SUM(i.retain_until < " +
                   detail::time_literal(now) + ") AS SIGNED) FROM sequence_instance i WHERE i.state = 'OPEN' GROUP BY i.name ORDER BY i.name",
               [&](const detail::row& r) {
                   out.push_back({text_at(r, 0), static_cast<std::size_t>(number_at(r, 1)), static_cast<std::size_t>(number_at(r, 2))});
               });
        return out;
    });
}

std::optional<instance_view> store::view_instance(const std::string& sequence, const std::string& context_id, const message_page& page) {
    check_page(page);
    return view_where("i.name = " + detail::bytes_literal(sequence) + " AND i.context_id = " + detail::bytes_literal(context_id), page);
}

std::optional<instance_view> store::view_instance(instance_id id, const message_page& page) {
    check_page(page);
    return view_where("i.id = " + std::to_string(id), page);
}

std::optional<instance_view> store::view_where(const std::string& where, const message_page& page) {
    return detail::autocommitted(*pool_, "reading an instance", [&](detail::connection& c) -> std::optional<instance_view> {
        std::optional<instance_view> view;
        c.rows("SELECT " + detail::instance_columns() + ", i.pending_action, " + microseconds_of("i.pending_action_requested_at") +
                   " FROM sequence_instance i WHERE " + where,
               [&](const detail::row& r) {
                   view = instance_view{detail::instance_at(r), {}, {}, std::nullopt, {}};
                   constexpr std::size_t action = detail::instance_column_count;
                   if (!detail::null_at(r, action))
                       view->actions.on_instance =
                           instance_request{parse_instance_action(text_at(r, action)), detail::from_microseconds(number_at(r, action + 1))};
               });
        if (!view) return view;
        const std::string id = std::to_string(view->instance.id);
        // One row more than the page holds tells whether another page follows.
        c.rows("SELECT " + message_with_request_columns() + " FROM sequenced_message m WHERE m.sequence_instance_id = " + id +
                   " AND m.id > " + std::to_string(page.after) + " ORDER BY m.id LIMIT " +
                   limited(std::min<std::size_t>(page.limit, std::numeric_limits<std::size_t>::max() - 1) + 1),
               [&](const detail::row& r) {
                   view->messages.push_back(detail::message_at(r, false));
                   if (auto request = request_at(r, view->messages.back(), message_column_count)) view->actions.on_messages.push_back(*request);
               });
        if (view->messages.size() > page.limit) {
            const auto& beyond = view->messages.back();
            if (!view->actions.on_messages.empty() && view->actions.on_messages.back().message == beyond.id) view->actions.on_messages.pop_back();
            view->messages.pop_back();
            view->next = view->messages.back().id;
        }
        c.rows("SELECT state, count(*) FROM sequenced_message WHERE sequence_instance_id = " + id + " GROUP BY state",
               [&](const detail::row& r) { view->counts[detail::parse_message_state(text_at(r, 0))] = static_cast<std::size_t>(number_at(r, 1)); });
        view->numbering = numbering_of(c, view->instance.id);
        return view;
    });
}

std::optional<message_view> store::find_message(message_id id) { return message_where("m.id = " + std::to_string(id)); }

std::optional<message_view> store::find_message(const claim_key& key) {
    return message_where(detail::key_condition(key, "m.") + " ORDER BY m.id DESC LIMIT 1");
}

std::optional<message_view> store::message_where(const std::string& where) {
    return detail::autocommitted(*pool_, "reading a message", [&](detail::connection& c) -> std::optional<message_view> {
        std::optional<message_view> view;
        c.rows("SELECT " + message_with_request_columns() + ", " + detail::instance_columns() +
                   " FROM sequenced_message m JOIN sequence_instance i ON i.id = m.sequence_instance_id WHERE " + where,
               [&](const detail::row& r) {
                   auto m = detail::message_at(r, false);
                   auto pending = request_at(r, m, message_column_count);
                   view = message_view{std::move(m), detail::instance_at(r, message_column_count + 2), pending};
               });
        return view;
    });
}

}  // namespace seqinbox::mariadb
