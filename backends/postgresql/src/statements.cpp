#include "statements.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "codec.hpp"

namespace seqinbox::postgresql::detail {

using soci::into;
using soci::use;

const std::string& instance_columns_sql() {
    static const std::string list = "id, name, context_id, state, " + sql_microseconds("created_at") + ", " +
                                    sql_microseconds("retain_until") + ", " + sql_microseconds("remove_after");
    return list;
}

namespace {

/// A FROM item of one row that, when :skip_flush is 1, makes the commit of the statement's own
/// (autocommitted) transaction not wait for its WAL flush; SET LOCAL in the same round trip.
std::string skip_flush_source_sql(std::string_view param = ":skip_flush") {
    return " FROM (SELECT CASE WHEN CAST(" + std::string(param) + " AS boolean)"
           " THEN set_config('synchronous_commit', 'off', true) END) AS commit_setting";
}

/// The array parameters $1, $2 (text[]) and $3, $4 (bigint[]) side by side, as the rows of
/// `alias`(columns).
std::string four_arrays_sql(std::string_view alias) {
    return " FROM unnest(CAST($1 AS text[]), CAST($2 AS text[]), CAST($3 AS bigint[]), CAST($4 AS bigint[])) AS " + std::string(alias);
}

}  // namespace

// Reads first: the steady state finds the instance, and an INSERT would draw a sequence value
// even when it conflicts. With skip_flush the creation's commit does not wait for its WAL flush
// (store_options::flush_every_commit).
instance_upsert::instance_upsert(statement_site s)
    : st(prepared_with(s,
                       "WITH existing AS (SELECT " + instance_columns_sql() +
                           " FROM sequence_instance WHERE name = :name AND context_id = :context_id),"
                           " inserted AS (INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)"
                           " SELECT :name_again, :context_id_again, 'OPEN', " + sql_timestamp(":created_at") + ", " +
                           sql_timestamp(":retain_until") +
                           skip_flush_source_sql() +
                           " WHERE NOT EXISTS (SELECT 1 FROM existing)"
                           " ON CONFLICT (name, context_id) DO NOTHING RETURNING " + instance_columns_sql() + ")"
                           " SELECT existing.*, 0 FROM existing UNION ALL SELECT inserted.*, 1 FROM inserted",
                       std::tuple_cat(into_instance(row), std::tuple{into(created)}), use(name), use(context_id),
                       use(name), use(context_id), use(created_at), use(retain_until), use(skip_flush))) {}

// instance_upsert for many pairs. Pairs inserted by a transaction that committed after this
// statement's snapshot are in neither part: the caller asks again for them.
// Every statement of a batch reaches the tables through one index probe per requested key (a
// LATERAL subquery with LIMIT or OFFSET 0, which the planner does not turn into a join): a
// hashed join over the whole table is what the planner prefers for a hundred keys on tables of
// some ten thousand rows, and its cost grows with the tables.
const named_sql& instance_upsert_batch_sql() {
    static const named_sql s = named(
        "instance_upsert_batch",
        "WITH requested AS (SELECT *" + four_arrays_sql("x(name, context_id, created_at, retain_until)") + "),"
            " existing AS (SELECT s.* FROM requested q CROSS JOIN LATERAL (SELECT " + instance_columns_sql() +
            " FROM sequence_instance i WHERE i.name = q.name AND i.context_id = q.context_id LIMIT 1) AS s),"
            " inserted AS (INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)"
            " SELECT q.name, q.context_id, 'OPEN', " + sql_timestamp("q.created_at") + ", " + sql_timestamp("q.retain_until") +
            " FROM requested q CROSS JOIN LATERAL (SELECT 1" + skip_flush_source_sql("$5") + ") AS setting"
            " WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.name = q.name AND e.context_id = q.context_id)"
            " ORDER BY q.name COLLATE \"C\", q.context_id COLLATE \"C\""
            " ON CONFLICT (name, context_id) DO NOTHING RETURNING " + instance_columns_sql() + ")"
            " SELECT existing.*, 0 FROM existing UNION ALL SELECT inserted.*, 1 FROM inserted");
    return s;
}

named_sql named(const char* name, std::string text) { return {std::string("seqinbox_") + name, std::move(text)}; }

const named_sql& local_settings_sql() {
    static const named_sql s = named("local_settings",
                                     "SELECT set_config('idle_in_transaction_session_timeout',"
                                     " COALESCE($1, current_setting('idle_in_transaction_session_timeout')), true),"
                                     " set_config('lock_timeout', $2, true)");
    return s;
}

const named_sql& begin_sql() {
    static const named_sql s = named("begin", "BEGIN");
    return s;
}

const named_sql& commit_sql() {
    static const named_sql s = named("commit", "COMMIT");
    return s;
}

const named_sql& savepoint_sql(savepoint_command command, std::size_t depth) {
    static std::mutex mutex;
    static std::map<std::pair<savepoint_command, std::size_t>, named_sql> made;  // nodes stay put: pipelines keep pointers
    const std::lock_guard lock(mutex);
    auto [at, fresh] = made.try_emplace({command, depth});
    if (fresh) {
        const std::string point = "seqinbox_" + std::to_string(depth);
        const std::string depth_text = std::to_string(depth);
        switch (command) {
        case savepoint_command::take: at->second = {"seqinbox_savepoint_" + depth_text, "SAVEPOINT " + point}; break;
        case savepoint_command::release: at->second = {"seqinbox_release_" + depth_text, "RELEASE SAVEPOINT " + point}; break;
        case savepoint_command::roll_back_to:
            at->second = {"seqinbox_rollback_to_" + depth_text, "ROLLBACK TO SAVEPOINT " + point};
            break;
        }
    }
    return at->second;
}

// A transactional logical-decoding message is the smallest write: it takes a transaction id and
// writes WAL, so its commit waits for the flush (as any write's commit does) and nothing changes.
const named_sql& wal_flush_sql() {
    static const named_sql s = named("wal_flush", "SELECT pg_logical_emit_message(true, 'seqinbox', 'flush')");
    return s;
}

const named_sql& claim_insert_sql() {
    static const named_sql s = named("claim_insert",
                                     "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id,"
                                     " created_at) VALUES ($1, $2, $3, " + sql_timestamp("$4") +
                                         ") ON CONFLICT (message_type, idempotence_id) DO NOTHING");
    return s;
}

const named_sql& claim_delete_sql() {
    static const named_sql s =
        named("claim_delete", "DELETE FROM sequential_inbox_idempotence WHERE message_type = $1 AND idempotence_id = $2");
    return s;
}

const named_sql& message_find_sql() {
    static const named_sql s = named("message_find", "SELECT id, sequence_instance_id, state, " + sql_microseconds("created_at") +
                                                         ", " + sql_microseconds("state_changed_at") + ", sequence_number"
                                                         " FROM sequenced_message WHERE message_type = $1 AND idempotence_id = $2"
                                                         " ORDER BY id");
    return s;
}

const named_sql& instance_lock_sql() {
    static const named_sql s =
        named("instance_lock", "SELECT " + instance_columns_sql() + " FROM sequence_instance WHERE id = $1 FOR NO KEY UPDATE");
    return s;
}

// The claim row's xmin is this transaction's id only when this transaction inserted it (the claim
// runs outside savepoints): a lost claim locks nothing.
const named_sql& instance_lock_if_claimed_sql() {
    static const named_sql s = named("instance_lock_if_claimed",
                                     "SELECT " + instance_columns_sql() + " FROM sequence_instance WHERE id = $1 AND EXISTS"
                                     " (SELECT 1 FROM sequential_inbox_idempotence c WHERE c.message_type = $2"
                                     " AND c.idempotence_id = $3 AND c.xmin = xid(pg_current_xact_id_if_assigned()))"
                                     " FOR NO KEY UPDATE");
    return s;
}

// One statement, so that every claim is inserted before the first lock: the sort below the row
// locking reads all of `won` first. Keys in byte order (COLLATE "C", as claim_key compares) and
// instances in id order: two batches never wait for each other in a cycle. No xmin test tells
// the won claims: RETURNING does, also inside a savepoint's subtransaction.
const named_sql& claim_batch_sql() {
    static const named_sql s = named(
        "claim_batch",
        "WITH requested AS (SELECT *" + four_arrays_sql("r(message_type, idempotence_id, instance, at)") + "),"
            " won AS (INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
            " SELECT message_type, idempotence_id, instance, " + sql_timestamp("at") +
            " FROM requested ORDER BY message_type COLLATE \"C\", idempotence_id COLLATE \"C\""
            " ON CONFLICT (message_type, idempotence_id) DO NOTHING RETURNING message_type, idempotence_id, sequence_instance_id),"
            " locked AS MATERIALIZED (SELECT s.* FROM (SELECT DISTINCT sequence_instance_id FROM won ORDER BY 1) AS w(id)"
            " CROSS JOIN LATERAL (SELECT " + instance_columns_sql() +
            " FROM sequence_instance i WHERE i.id = w.id LIMIT 1 FOR NO KEY UPDATE) AS s)"
            " SELECT won.message_type, won.idempotence_id, locked.* FROM won LEFT JOIN locked ON locked.id = won.sequence_instance_id");
    return s;
}

const named_sql& message_find_batch_sql() {
    static const named_sql s = named(
        "message_find_batch",
        "SELECT m.message_type, m.idempotence_id, m.id, m.sequence_instance_id, m.state, " + sql_microseconds("m.created_at") +
            ", " + sql_microseconds("m.state_changed_at") + ", m.sequence_number"
            " FROM unnest(CAST($1 AS text[]), CAST($2 AS text[])) AS k(message_type, idempotence_id) CROSS JOIN LATERAL"
            " (SELECT * FROM sequenced_message f WHERE f.message_type = k.message_type AND f.idempotence_id = k.idempotence_id"
            " OFFSET 0) AS m ORDER BY m.id");
    return s;
}

const named_sql& message_types_batch_sql() {
    static const named_sql s = named("message_types_batch",
                                     "SELECT w.id, m.message_type, m.state, count(*) FROM (SELECT DISTINCT unnest(CAST($1 AS bigint[]))) AS w(id)"
                                     " CROSS JOIN LATERAL (SELECT message_type, state FROM sequenced_message f"
                                     " WHERE f.sequence_instance_id = w.id AND f.state IN ('PROCESSED', 'WAITING') OFFSET 0) AS m"
                                     " GROUP BY w.id, m.message_type, m.state");
    return s;
}

const named_sql& message_types_sql() {
    static const named_sql s = named("message_types",
                                     "SELECT message_type, state, count(*) FROM sequenced_message WHERE sequence_instance_id = $1"
                                     " AND state IN ('PROCESSED', 'WAITING') GROUP BY message_type, state");
    return s;
}

const named_sql& messages_store_sql() {
    static const named_sql s = named("messages_store",
                                     "SELECT seqinbox_store_messages(CAST($1 AS bigint[]), CAST($2 AS text[]), CAST($3 AS text[]),"
                                     " CAST($4 AS text[]), CAST($5 AS bigint[]), CAST($6 AS bigint[]), CAST($7 AS boolean[]),"
                                     " CAST($8 AS text[]), CAST($9 AS text[]), CAST($10 AS integer[]), CAST($11 AS bigint[]),"
                                     " CAST($12 AS text[]), CAST($13 AS text[]), CAST($14 AS text[]), CAST($15 AS bigint[]),"
                                     " CAST($16 AS text[]), CAST($17 AS bigint[]))");
    return s;
}

const named_sql& instances_close_sql() {
    static const named_sql s = named("instances_close", "UPDATE sequence_instance i SET state = 'CLOSED', closed_at = " +
                                                            sql_timestamp("c.at") +
                                                            " FROM unnest(CAST($1 AS bigint[]), CAST($2 AS bigint[])) AS c(at, id)"
                                                            " WHERE i.id = c.id AND i.id = ANY (CAST($2 AS bigint[]))");
    return s;
}

const named_sql& message_states_update_sql() {
    static const named_sql s = named("message_states_update", "UPDATE sequenced_message m SET state = u.state, state_changed_at = " +
                                                                  sql_timestamp("u.at") +
                                                                  " FROM unnest(CAST($1 AS text[]), CAST($2 AS bigint[]), CAST($3 AS bigint[]))"
                                                                  " AS u(state, at, id) WHERE m.id = u.id AND m.id = ANY (CAST($3 AS bigint[]))");
    return s;
}

namespace {

/// The columns of a waiting message `m` with its record (headers packed as hex pairs).
std::string waiting_message_columns() {
    return "m.id, m.message_type, m.idempotence_id, " + sql_microseconds("m.created_at") + ", " + sql_microseconds("m.state_changed_at") +
           ", m.cluster, m.topic, m.partition, m.\"offset\", encode(m.key, 'hex'), encode(m.value, 'hex'), " +
           sql_microseconds("m.record_time") +
           ", COALESCE(m.record_headers, ''), m.sequence_number";
}

}  // namespace

const named_sql& waiting_messages_sql() {
    static const named_sql s = named("waiting_messages", "SELECT " + waiting_message_columns() +
                                                             " FROM sequenced_message m WHERE m.sequence_instance_id = $1 AND m.state = 'WAITING'"
                                                             " AND m.message_type = ANY (CAST($2 AS text[])) ORDER BY m.id");
    return s;
}

// The partial index sequenced_message_waiting answers it; the LIMIT bounds the scan by maxWaiting.
const named_sql& waiting_count_sql() {
    static const named_sql s = named("waiting_count", "SELECT count(*) FROM (SELECT 1 FROM sequenced_message"
                                                      " WHERE sequence_instance_id = $1 AND state = 'WAITING' LIMIT $2) AS w");
    return s;
}

// The instance id and the state follow the columns of waiting_messages_batch_sql.
const named_sql& action_targets_sql() {
    static const named_sql s = named("action_targets",
                                     "SELECT " + waiting_message_columns() +
                                         ", m.sequence_instance_id, m.state FROM sequenced_message m WHERE m.sequence_instance_id = $1"
                                         " AND m.id = ANY (CAST($2 AS bigint[])) AND (m.state = 'WAITING' OR (m.state = 'FAILED' AND"
                                         " num_nonnulls(m.cluster, m.topic, m.partition, m.\"offset\", m.key, m.value, m.record_time,"
                                         " m.record_headers) > 0)) ORDER BY m.id");
    return s;
}

// One index probe per (instance, type) pair; the instance id is the last column.
const named_sql& waiting_messages_batch_sql() {
    static const named_sql s = named(
        "waiting_messages_batch",
        "SELECT " + waiting_message_columns() +
            ", m.sequence_instance_id FROM unnest(CAST($1 AS bigint[]), CAST($2 AS text[])) AS w(instance, message_type)"
            " CROSS JOIN LATERAL (SELECT * FROM sequenced_message f WHERE f.sequence_instance_id = w.instance"
            " AND f.state = 'WAITING' AND f.message_type = w.message_type OFFSET 0) AS m ORDER BY m.id");
    return s;
}

// One statement: the maximum is one backward descent of V11's index of PROCESSED numbers.
const named_sql& last_released_number_sql() {
    static const named_sql s = named(
        "last_released_number",
        "SELECT GREATEST((SELECT max(sequence_number) FROM sequenced_message WHERE sequence_instance_id = CAST($1 AS bigint)"
        " AND state = 'PROCESSED' AND sequence_number IS NOT NULL), (SELECT skipped_through FROM sequence_instance"
        " WHERE id = CAST($1 AS bigint)))");
    return s;
}

// A range scan of V11's index of WAITING numbers, stopping at the limit.
const named_sql& waiting_numbered_sql() {
    static const named_sql s = named("waiting_numbered",
                                     "SELECT " + waiting_message_columns() +
                                         ", m.sequence_instance_id FROM sequenced_message m WHERE m.sequence_instance_id = $1"
                                         " AND m.state = 'WAITING' AND m.sequence_number IS NOT NULL AND m.sequence_number >= $2"
                                         " ORDER BY m.sequence_number, m.id LIMIT $3");
    return s;
}

// The same index, each number once: the scan stops after $2 numbers.
const named_sql& waiting_numbers_sql() {
    static const named_sql s = named("waiting_numbers", "SELECT DISTINCT sequence_number FROM sequenced_message WHERE sequence_instance_id = $1"
                                                        " AND state = 'WAITING' AND sequence_number IS NOT NULL ORDER BY 1 LIMIT $2");
    return s;
}

// A lower number writes no row version.
const named_sql& numbers_skip_sql() {
    static const named_sql s = named("numbers_skip", "UPDATE sequence_instance SET skipped_through = CAST($2 AS bigint) WHERE id = $1"
                                                     " AND (skipped_through IS NULL OR skipped_through < CAST($2 AS bigint))");
    return s;
}

// A loose scan of V11's index of WAITING numbered rows by (instance, stored at): one descent per
// instance holding some, which gives its oldest; the instance row is then read by its key
// (LATERAL with LIMIT: as a join, the planner could hash the table). The recursion runs only as
// far as the LIMIT needs, and yields the instances in id order, which the nested loop keeps.
// Its cost grows with the instances holding WAITING numbered rows that the batch passes, not
// with their rows nor with the instances without any.
const named_sql& stalled_numbered_sql() {
    static const std::string next_instance =
        "SELECT sequence_instance_id, created_at FROM sequenced_message WHERE state = 'WAITING' AND sequence_number IS NOT NULL"
        " AND sequence_instance_id > ";
    static const named_sql s = named(
        "stalled_numbered",
        "WITH RECURSIVE waiting(instance, since) AS ((" + next_instance + "CAST($3 AS bigint) ORDER BY sequence_instance_id, created_at"
        " LIMIT 1) UNION ALL SELECT n.sequence_instance_id, n.created_at FROM waiting w CROSS JOIN LATERAL (" + next_instance +
            "w.instance ORDER BY sequence_instance_id, created_at LIMIT 1) AS n)"
            " SELECT w.instance FROM waiting w CROSS JOIN LATERAL (SELECT 1 FROM sequence_instance i WHERE i.id = w.instance"
            " AND i.name = $1 AND i.state = 'OPEN' LIMIT 1) AS open_instance WHERE w.since <= " +
            sql_timestamp("CAST($2 AS bigint)") + " LIMIT $4");
    return s;
}

namespace {

/// The keyset continuation of a scan by (column, id): rows after ($key, $id).
std::string after_position(std::string_view column, int key, int id) {
    return " AND (" + std::string(column) + ", id) > (" + sql_timestamp("$" + std::to_string(key)) + ", $" + std::to_string(id) + ")";
}

}  // namespace

namespace {

/// When a CLOSED instance's window starts: its closing, or its creation for a row closed
/// without that time (not written by seqinbox). As in the index of V8.
constexpr const char* closed_key = "COALESCE(closed_at, created_at)";

}  // namespace

// Per (sequence, retention) group of CLOSED instances, found one index descent each (a loose
// scan of V8's index, from the end of each group: cleanup deletes at their start, whose dead
// index entries a descent there would walk until vacuum): a group's window is one length, so its
// instances end their window in closing order, and the range scan of each, from the scan
// position on, stops at the first still inside it. The window: the
// sequence's from the list ($1 names, encode_list; $2 seconds, "60,3600"; the first listed),
// else the group's retention. The window end (microseconds) is the sort key of the scan
// position ($4, $5); now $3, limit $6. Times as microseconds, so that no time zone's day enters.
const named_sql& closed_instances_sql() {
    static const std::string key = std::string("(") + closed_key + ")";
    static const named_sql s = named(
        "closed_instances",
        "WITH RECURSIVE grp(name, retention) AS ("
        "(SELECT name, retain_until - created_at FROM sequence_instance WHERE state = 'CLOSED'"
        " ORDER BY name DESC, retain_until - created_at DESC LIMIT 1)"
        " UNION ALL SELECT n.name, n.retention FROM grp g CROSS JOIN LATERAL (SELECT name, retain_until - created_at AS retention"
        " FROM sequence_instance WHERE state = 'CLOSED' AND (name, retain_until - created_at) < (g.name, g.retention)"
        " ORDER BY name DESC, retain_until - created_at DESC LIMIT 1) AS n),"
        " windowed AS (SELECT g.name, g.retention, COALESCE((SELECT CAST(w.seconds AS bigint) * 1000000 FROM"
        " unnest(string_to_array($1, ','), string_to_array($2, ',')) WITH ORDINALITY AS w(name, seconds, listed)"
        " WHERE convert_from(decode(w.name, 'hex'), 'UTF8') = g.name ORDER BY w.listed LIMIT 1),"
        " CAST(extract(epoch FROM g.retention) * 1000000 AS bigint)) AS window_us FROM grp g)"
        " SELECT f.id, f.window_end FROM windowed g CROSS JOIN LATERAL (SELECT i.id, " + sql_microseconds(key) +
            " + g.window_us AS window_end FROM sequence_instance i WHERE i.state = 'CLOSED' AND i.name = g.name"
            " AND i.retain_until - i.created_at = g.retention AND " + key + " <= " + sql_timestamp("(CAST($3 AS bigint) - g.window_us)") +
            " AND (" + key + ", i.id) > (" + sql_timestamp("(CAST($4 AS bigint) - g.window_us)") + ", CAST($5 AS bigint))"
            " ORDER BY " + key + ", i.id LIMIT $6) AS f ORDER BY f.window_end, f.id LIMIT $6");
    return s;
}

// Through the partial index of marked OPEN rows (V7).
const named_sql& removable_instances_sql() {
    static const named_sql s = named("removable_instances", "SELECT " + instance_columns_sql() +
                                                                " FROM sequence_instance WHERE state = 'OPEN' AND remove_after <= " +
                                                                sql_timestamp("$1") + after_position("remove_after", 2, 3) +
                                                                " ORDER BY remove_after, id LIMIT $4");
    return s;
}

// Through the partial index of unmarked OPEN rows (V7): marked rows leave it, and the position
// passes over those the previous batches marked or skipped.
const named_sql& expired_instances_mark_sql() {
    static const named_sql s = named(
        "expired_instances_mark",
        "UPDATE sequence_instance SET remove_after = retain_until + CAST($1 AS bigint) * INTERVAL '1 second'"
        " WHERE id IN (SELECT id FROM sequence_instance WHERE state = 'OPEN' AND remove_after IS NULL AND retain_until < " +
            sql_timestamp("$2") + after_position("retain_until", 3, 4) +
            " ORDER BY retain_until, id LIMIT $5 FOR NO KEY UPDATE SKIP LOCKED) RETURNING " + instance_columns_sql());
    return s;
}

const named_sql& instances_lock_for_removal_sql() {
    static const named_sql s = named("instances_lock_for_removal", "SELECT " + instance_columns_sql() + ", " +
                                                                       sql_microseconds("closed_at") +
                                                                       " FROM sequence_instance WHERE id = ANY (CAST($1 AS bigint[]))"
                                                                       " ORDER BY id FOR UPDATE SKIP LOCKED");
    return s;
}

const named_sql& instances_delete_sql() {
    static const named_sql s = named("instances_delete", "DELETE FROM sequence_instance WHERE id = ANY (CAST($1 AS bigint[]))");
    return s;
}

// Per instance (in id order) a range scan of V8's index of WAITING rows: no page sorts the
// instance's other rows. Of the first $4 candidates, the page is those within $5 bytes (the
// first one always); sizes come from the stored lengths, and the values of the rows past the
// budget are never read.
const named_sql& waiting_messages_page_sql() {
    static const named_sql s = named(
        "waiting_messages_page",
        "SELECT " + waiting_message_columns() + ", m.sequence_instance_id, m.candidates FROM (SELECT c.*, sum(c.size) OVER"
        " (ORDER BY c.sequence_instance_id, c.id ROWS UNBOUNDED PRECEDING) AS upto, count(*) OVER () AS candidates FROM (SELECT f.* FROM"
        " (SELECT DISTINCT unnest(CAST($1 AS bigint[]))) AS w(instance) CROSS JOIN LATERAL (SELECT r.*,"
        " COALESCE(octet_length(r.key), 0) + COALESCE(octet_length(r.value), 0) + COALESCE(octet_length(r.record_headers), 0) AS size"
        " FROM sequenced_message r WHERE r.sequence_instance_id = w.instance AND r.state = 'WAITING'"
        " AND (r.sequence_instance_id, r.id) > (CAST($2 AS bigint), CAST($3 AS bigint)) ORDER BY r.id LIMIT $4) AS f"
        " WHERE w.instance >= CAST($2 AS bigint) ORDER BY f.sequence_instance_id, f.id LIMIT $4) AS c) AS m"
        " WHERE m.upto <= CAST($5 AS bigint) OR m.upto = m.size ORDER BY m.sequence_instance_id, m.id");
    return s;
}

message_insert::message_insert(statement_site s)
    : st(prepared(s,
                  "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,"
                  " state_changed_at, sequence_number) VALUES (:instance, :type, :idempotence_id, :state, " +
                      sql_timestamp(":created_at") + ", " + sql_timestamp(":state_changed_at") + ", :number)",
                  use(instance), use(type), use(idempotence_id), use(state), use(created_at), use(state_changed_at),
                  use(number, number_null))) {}

message_insert_with_record::message_insert_with_record(statement_site s)
    : st(prepared(s,
                  "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state,"
                  " created_at, state_changed_at, cluster, topic, partition, \"offset\", key, value, traceparent, record_time,"
                  " record_headers, sequence_number) VALUES (:instance, :type, :idempotence_id, :state, " + sql_timestamp(":created_at") +
                      ", " + sql_timestamp(":state_changed_at") +
                      ", :cluster, :topic, :partition, :offset, decode(:key, 'hex'), decode(:value, 'hex'), :traceparent, " +
                      sql_timestamp(":record_time") + ", :headers, :number)",
                  use(instance), use(type), use(idempotence_id), use(state), use(created_at), use(state_changed_at),
                  use(cluster), use(topic), use(partition), use(offset), use(key, key_null), use(value, value_null),
                  use(traceparent, traceparent_null), use(record_time), use(headers), use(number, number_null))) {}

message_store::message_store(statement_site s)
    : st(prepared(s,
                  "SELECT seqinbox_store_message(:instance, :type, :idempotence_id, :state, " + sql_timestamp(":created_at") +
                      ", " + sql_timestamp(":state_changed_at") +
                      ", CAST(:with_record AS boolean), :cluster, :topic, :partition, :offset, decode(:key, 'hex'),"
                      " decode(:value, 'hex'), :traceparent, " + sql_timestamp(":record_time") +
                      ", :headers, CAST(:number AS bigint))" + skip_flush_source_sql(),
                  into(outcome), use(instance), use(type), use(idempotence_id), use(state), use(created_at),
                  use(state_changed_at), use(with_record), use(cluster), use(topic), use(partition), use(offset),
                  use(key, key_null), use(value, value_null), use(traceparent, traceparent_null), use(record_time), use(headers),
                  use(number, number_null), use(skip_flush))) {}

transaction_id_query::transaction_id_query(statement_site s)
    : st(prepared(s, "SELECT txid_current()", into(id))) {}

}  // namespace seqinbox::postgresql::detail
