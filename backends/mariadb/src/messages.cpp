// Sequenced messages: reads, the state step (store_message) and its per-key lock.
#include <map>

#include "codec.hpp"
#include "connection.hpp"
#include "locked_reads.hpp"
#include "seqinbox/error.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

using detail::bytes_literal;
using detail::time_literal;

namespace {

std::string types_listed(std::span<const std::string> types) {
    return detail::listed(types, [](const std::string& t) { return bytes_literal(t); });
}

/// SET list (or VALUES list, `assign` false) of a message's record columns.
std::string record_values(const envelope& e, bool assign) {
    const auto traceparent = e.find_header(traceparent_header);
    const std::pair<const char*, std::string> columns[] = {
        {"cluster", bytes_literal(e.cluster)},
        {"topic", bytes_literal(e.topic)},
        {"`partition`", std::to_string(e.partition)},
        {"`offset`", std::to_string(e.offset)},
        {"record_key", detail::nullable_bytes_literal(e.key)},
        {"record_value", detail::nullable_bytes_literal(e.value)},
        {"traceparent", traceparent ? bytes_literal(*traceparent) : std::string("NULL")},
        {"record_time", time_literal(e.time)},
        {"record_headers", bytes_literal(detail::encode_headers(e.headers))},
    };
    std::string text;
    for (const auto& [column, value] : columns) text += std::string(", ") + (assign ? std::string(column) + " = " : "") + value;
    return text;
}

/// The row's sequence number as SQL: NULL outside numbered sequences.
std::string number_literal(const message_record& row) { return row.number ? std::to_string(*row.number) : "NULL"; }

/// The insert of `row`; with a `condition` (" WHERE ..."), an INSERT ... SELECT of it.
std::string insert_sql(const message_record& row, const std::string& condition = {}) {
    const bool with_record = row.payload.has_value();
    const std::string values = std::to_string(row.instance) + ", " + bytes_literal(row.type) + ", " + bytes_literal(row.idempotence_id) +
                               ", '" + std::string(detail::state_text(row.state)) + "', " + time_literal(row.created_at) + ", " +
                               time_literal(row.state_changed_at) + ", " + number_literal(row) +
                               (with_record ? record_values(*row.payload, false) : "");
    return "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at, "
           "sequence_number" +
           std::string(with_record ? ", cluster, topic, `partition`, `offset`, record_key, record_value, traceparent, record_time, "
                                     "record_headers"
                                   : "") +
           (condition.empty() ? ") VALUES (" + values + ")" : ") SELECT " + values + " FROM DUAL" + condition);
}

/// Creates the key's lock row or locks the existing one (held until the transaction ends).
std::string key_lock_sql(const message_record& row) {
    return "INSERT INTO sequenced_message_key_lock (message_type, idempotence_id, sequence_instance_id) VALUES (" + bytes_literal(row.type) +
           ", " + bytes_literal(row.idempotence_id) + ", " + std::to_string(row.instance) +
           ") ON DUPLICATE KEY UPDATE message_type = message_type";
}

std::string message_name(const message_record& row) { return "message " + row.type + " " + row.idempotence_id; }

/// What storing `row` is doing, with the size of the record it keeps (what makes its statement long).
std::string storing(const message_record& row) {
    std::string doing = "storing the state of " + message_name(row);
    if (!row.payload) return doing;
    const auto& e = *row.payload;
    std::size_t headers = 0;
    for (const auto& h : e.headers) headers += h.name.size() + h.value.size();
    return doing + " (its record: value " + std::to_string(e.value ? e.value->size() : 0) + " bytes, key " +
           std::to_string(e.key ? e.key->size() : 0) + ", headers " + std::to_string(headers) + ")";
}

detail::statement messages_matching(const std::string& condition, std::vector<message_record>& rows) {
    return {"SELECT " + detail::message_columns() + " FROM sequenced_message m WHERE " + condition + " ORDER BY m.id",
            [&rows](const detail::row& r) { rows.push_back(detail::message_at(r, false)); }};
}

}  // namespace

detail::statement detail::messages_with_keys(const std::vector<claim_key>& keys, std::vector<message_record>& rows) {
    return messages_matching(any_key(keys, "m."), rows);
}

std::vector<detail::statement> detail::messages_with_keys_within(const std::vector<claim_key>& keys, std::vector<message_record>& rows,
                                                                 std::size_t budget) {
    std::vector<std::string> conditions;
    for (const auto& key : keys) conditions.push_back("(" + key_condition(key, "m.") + ")");
    std::vector<statement> statements;
    for (const auto& condition : joined_within(conditions, " OR ", budget)) statements.push_back(messages_matching(condition, rows));
    return statements;
}

std::vector<message_record> store::transaction::find_messages(const claim_key& key) {
    std::vector<message_record> rows;
    impl_->send("reading the rows of message " + key.type + " " + key.idempotence_id, {detail::messages_with_keys({key}, rows)});
    return rows;
}

std::vector<message_record> store::transaction::waiting_messages(instance_id instance, std::span<const std::string> types) {
    const waiting_query query{instance, std::vector<std::string>(types.begin(), types.end())};
    return std::move(waiting_messages(std::span<const waiting_query>(&query, 1)).front());
}

// The index (sequence_instance_id, state, id) answers it; the LIMIT bounds the scan by maxWaiting.
std::size_t store::transaction::count_waiting(instance_id instance, std::size_t up_to) {
    std::size_t count = 0;
    impl_->rows("counting waiting messages",
                "SELECT count(*) FROM (SELECT 1 FROM sequenced_message WHERE sequence_instance_id = " + std::to_string(instance) +
                    " AND state = 'WAITING' LIMIT " + std::to_string(up_to) + ") AS w",
                [&](const detail::row& row) { count = static_cast<std::size_t>(detail::number_at(row, 0)); });
    return count;
}

std::vector<std::vector<message_record>> store::transaction::waiting_messages(std::span<const waiting_query> queries) {
    std::vector<std::vector<message_record>> answers(queries.size());
    std::vector<std::string> conditions;
    for (const auto& q : queries) {
        if (q.types.empty()) continue;
        conditions.push_back("(m.sequence_instance_id = " + std::to_string(q.instance) + " AND m.message_type IN (" +
                             types_listed(q.types) + "))");
    }
    if (conditions.empty()) return answers;
    // By id: an instance named in two statements (two queries of it) gives its rows once.
    std::map<instance_id, std::map<message_id, message_record>> by_instance;
    std::vector<detail::statement> reads;
    for (const auto& part : detail::joined_within(conditions, " OR ", impl_->conn().max_list_bytes()))
        reads.push_back({"SELECT " + detail::message_columns_with_record() + " FROM sequenced_message m WHERE m.state = 'WAITING' AND (" +
                             part + ")",
                         [&](const detail::row& row) {
                             auto m = detail::message_at(row, true);
                             by_instance[m.instance].insert_or_assign(m.id, std::move(m));
                         }});
    impl_->send("reading waiting messages", std::move(reads));
    for (std::size_t i = 0; i < queries.size(); ++i) {
        for (const auto& [id, m] : by_instance[queries[i].instance])
            for (const auto& type : queries[i].types)
                if (m.type == type) {
                    answers[i].push_back(m);
                    break;
                }
    }
    return answers;
}

void store::transaction::insert_message(message_record row) { impl_->run("inserting " + message_name(row), insert_sql(row)); }

stored_as store::transaction::store_message(message_record row) { return store_message(std::move(row), false); }

stored_as store::transaction::store_message(message_record row, bool write_at_commit) {
    const std::string doing = storing(row);
    const std::string key = detail::key_condition(row.key());
    // The key's lock row, held until the transaction ends; then the key's rows as committed now.
    bool processed = false, waiting = false;
    message_id newest_failed = 0;
    impl_->send(doing, {{key_lock_sql(row)},
                        {"SELECT id, state FROM sequenced_message WHERE " + key + " ORDER BY id", [&](const detail::row& r) {
                             const auto state = detail::parse_message_state(detail::text_at(r, 1));
                             processed = processed || state == message_state::processed;
                             waiting = waiting || state == message_state::waiting;
                             if (state == message_state::failed) newest_failed = detail::number_at(r, 0);
                         }}});
    const std::string state = "'" + std::string(detail::state_text(row.state)) + "'";
    if (processed || (waiting && row.state != message_state::processed)) return stored_as::left_existing;
    const auto write = [&](std::string sql, stored_as stored) {
        if (write_at_commit)
            impl_->at_commit.emplace_back(doing, detail::statement{std::move(sql)});
        else
            impl_->run(doing, sql);
        return stored;
    };
    if (waiting)
        return write("UPDATE sequenced_message SET state = " + state + ", state_changed_at = " + time_literal(row.state_changed_at) +
                         " WHERE " + key + " AND state = 'WAITING'",
                     stored_as::updated);
    if (newest_failed != 0)
        return write("UPDATE sequenced_message SET state = " + state + ", state_changed_at = " + time_literal(row.state_changed_at) +
                         ", sequence_number = " + number_literal(row) + (row.payload ? record_values(*row.payload, true) : "") +
                         " WHERE id = " + std::to_string(newest_failed),
                     stored_as::updated);
    return write(insert_sql(row), stored_as::inserted);
}

/// The common case of a state step in a transaction of its own: no row of the key yet. One round
/// trip: BEGIN, the key's lock, the insert unless a row of the key exists, COMMIT. Whether it
/// inserted; when not, only the lock row was written.
bool store::transaction::insert_if_first(const message_record& row) {
    const std::string doing = storing(row);
    long long inserted = 0;
    impl_->at_commit.emplace_back(doing, detail::statement{key_lock_sql(row)});
    impl_->at_commit.emplace_back(doing, detail::statement{insert_sql(row, " WHERE NOT EXISTS (SELECT 1 FROM sequenced_message WHERE " +
                                                                              detail::key_condition(row.key()) + ")"),
                                                           {}, &inserted});
    commit();
    return inserted == 1;
}

stored_as store::store_message(message_record row) {
    if (begin().insert_if_first(row)) return stored_as::inserted;
    auto tx = begin();
    const auto stored = tx.store_message(std::move(row), true);
    tx.commit();
    return stored;
}

stored_as store::store_message_beside(transaction&, message_record row) { return store_message(std::move(row)); }

std::string store::buffering_problem(const message_record& row) const {
    // The longest statement storing it: the insert of a new key (insert_if_first), with room for
    // the numbers and times that differ when it is written.
    constexpr std::size_t room = 256;
    const std::size_t length =
        insert_sql(row, " WHERE NOT EXISTS (SELECT 1 FROM sequenced_message WHERE " + detail::key_condition(row.key()) + ")").size() + room;
    if (length <= pool_->max_query_bytes()) return {};
    pool_->refresh_max_query_bytes();  // raised meanwhile? (a session keeps the value it opened with)
    const std::size_t limit = pool_->max_query_bytes();
    if (length <= limit) return {};
    return storing(row) + ": its statement would be " + std::to_string(length) + " bytes, more than the " + std::to_string(limit) +
           " bytes one query may carry on this server (values travel as hex: raise max_allowed_packet to over twice the record's size)";
}

}  // namespace seqinbox::mariadb
