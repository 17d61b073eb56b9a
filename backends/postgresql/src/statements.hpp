#pragma once
// Private to seqinbox::postgresql: the SQL of the transaction and its claim path, one prepared
// statement per operation, and the instance columns every part of the store reads (the other
// parts keep their SQL beside their operations: actions.cpp, housekeeping.cpp, views.cpp). The
// statements sent in batches are named_sql (pipeline.hpp). The others are SOCI statements: each
// struct owns the variables its statement is bound to, so it is prepared once per connection and
// re-executed after the variables are set. Structs are heap-allocated: SOCI keeps their addresses.
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <soci/soci.h>

#include "pipeline.hpp"

namespace seqinbox::postgresql::detail {

// Statements sent in batches (pipeline.hpp), parameters in the order listed. Times are bigint
// microseconds since the epoch, ids bigint, as text.

/// A named_sql whose name says what it does; the prefix keeps it apart from SOCI's st_N.
named_sql named(const char* name, std::string text);

/// The settings of store_options for the current transaction alone (idle-in-transaction timeout
/// in ms or NULL to keep the server's, lock timeout in ms): sending_rules::local_settings.
const named_sql& local_settings_sql();

/// Transaction control, prepared like the rest (as pgbench -M prepared does): no parse per use.
const named_sql& begin_sql();
const named_sql& commit_sql();
/// SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT of the savepoint `depth` deep (1 for
/// the outermost): savepoints nest, so a name per depth keeps the prepared statements few.
enum class savepoint_command { take, release, roll_back_to };
const named_sql& savepoint_sql(savepoint_command command, std::size_t depth);
/// A write of no consequence: autocommitted, it returns once all WAL written so far is flushed.
const named_sql& wal_flush_sql();
/// The seed's claim (type, idempotence id, instance, at): the affected-row count decides.
const named_sql& claim_insert_sql();
const named_sql& claim_delete_sql();  ///< type, idempotence id
/// Rows of one claim key (type, idempotence id), without payload: id, instance, state, created
/// at, state changed at, number.
const named_sql& message_find_sql();
/// The instance row (id) FOR NO KEY UPDATE, columns as instance_columns_sql().
const named_sql& instance_lock_sql();
/// instance_lock_sql (id) when this transaction inserted the claim (type, idempotence id), else
/// no row and no lock.
const named_sql& instance_lock_if_claimed_sql();
/// instance_upsert for many (names, context ids, created at, retain until: array_literal; skip
/// flush 0 or 1): instance columns, then 1 when inserted. Missing pairs: ask again.
const named_sql& instance_upsert_batch_sql();
/// The claims of a batch (types, idempotence ids, instances, times: array_literal), in
/// key order, then the instances of the won ones FOR NO KEY UPDATE in id order: per won claim,
/// its type, idempotence id and instance columns as instance_columns_sql() (NULL when the
/// instance was not locked).
const named_sql& claim_batch_sql();
/// message_find_sql for many keys (types, idempotence ids: array_literal): type, idempotence id,
/// then the columns of message_find_sql; by id.
const named_sql& message_find_batch_sql();
/// message_types_sql for many instances (array_literal): instance id, type, state, rows.
const named_sql& message_types_batch_sql();
/// Distinct (type, state) of the PROCESSED and WAITING rows of an instance (id), with their number
/// of rows (the GROUP BY reads them all anyway: the bound of a buffer costs nothing more).
const named_sql& message_types_sql();
/// seqinbox_store_message (see message_store) for rows of distinct keys in a batch
/// (seqinbox_store_messages, schema V5), each parameter an array_literal with an item per row:
/// instance, type, idempotence id, state, created at, state changed at, with record (0 or 1),
/// cluster, topic, partition, offset, key and value as hex (NULL for none), traceparent, record
/// time, headers (encode_headers), number (NULL for none).
const named_sql& messages_store_sql();
const named_sql& instances_close_sql();         ///< at, id: each an array_literal
const named_sql& message_states_update_sql();   ///< states, times, ids (distinct): each an array_literal
/// WAITING rows of an instance (id) with the given types (array_literal), oldest first, with their
/// records: id, type, idempotence id, created at, state changed at, cluster, topic, partition,
/// offset, key and value as hex, record time, headers (encode_headers), number.
const named_sql& waiting_messages_sql();
/// How many WAITING rows an instance (id) has, counted no further than a limit (number).
const named_sql& waiting_count_sql();
/// The messages (ids: array_literal) of an instance (id) an action can run on: WAITING, or FAILED
/// with a record; the columns of waiting_messages_batch_sql, then the state. By id.
const named_sql& action_targets_sql();
constexpr int action_target_state_column = 15;
/// waiting_messages_sql for many (instance, type) pairs (instances, types: array_literal): its
/// columns, then the instance id; by id.
const named_sql& waiting_messages_batch_sql();
// Numbered sequences (numbering.cpp).
/// The highest number released in an instance (id): its highest PROCESSED number or its
/// skipped_through, whichever is higher; NULL when it has neither.
const named_sql& last_released_number_sql();
/// WAITING rows of an instance ($1) numbered $2 or higher, by number then id, at most $3: the
/// columns of waiting_messages_batch_sql.
const named_sql& waiting_numbered_sql();
/// The distinct numbers of an instance's ($1) WAITING rows, ascending, at most $2: number.
const named_sql& waiting_numbers_sql();
/// Raises an instance's ($1) skipped_through to $2 (a lower number changes nothing).
const named_sql& numbers_skip_sql();
/// OPEN instances of sequence $1 after id $3 holding a WAITING numbered row stored at or before
/// $2, by id, at most $4: id.
const named_sql& stalled_numbered_sql();
// Housekeeping (housekeeping.cpp): each reads on from a scan position (key as microseconds, id).
/// CLOSED instances past their window, by window end: sequence names ($1, encode_list) with their
/// windows in seconds ($2, "60,3600"), now ($3), after ($4 window end, $5 id), limit ($6): id,
/// window end.
const named_sql& closed_instances_sql();
/// OPEN instances to remove at $1, after ($2, $3), limit $4: instance_columns_sql().
const named_sql& removable_instances_sql();
/// Marks OPEN instances past retain_until at $2 with delay $1 seconds, after ($3, $4), limit $5,
/// skipping locked ones: instance_columns_sql() as marked.
const named_sql& expired_instances_mark_sql();
/// Locks the instances (ids: array_literal) in id order: instance_columns_sql(), closed at.
const named_sql& instances_lock_for_removal_sql();
/// Deletes the instances (ids: array_literal) with, by cascade, their messages and claims.
const named_sql& instances_delete_sql();
/// A page of the WAITING rows of the instances (ids: array_literal) after ($2 instance, $3 id), by
/// instance then id: of the next $4 rows (the candidates), those within $5 bytes of keys, values
/// and headers, and at least one. The columns of waiting_messages_batch_sql, then how many
/// candidates there were (fewer than $4, all taken: the last page).
const named_sql& waiting_messages_page_sql();

/// Columns of a sequence_instance row.
struct instance_columns {
    long long id = 0;
    std::string name, context_id, state;
    long long created_at = 0, retain_until = 0, remove_after = 0;
    soci::indicator remove_after_null = soci::i_ok;
};

/// Where a SOCI statement is made: its session, and whether it must go unnamed (through a
/// transaction pooler; see sending_rules), since SOCI prepares statements under names (st_N).
struct statement_site {
    soci::session& session;
    bool unnamed = false;
};

/// Prepares `sql` at `site` with the given exchange elements (into/use) in order; unnamed, it
/// is only parsed by each execution (a one-time query in SOCI's terms, re-executable all the same).
template <class... Elements>
soci::statement prepared(statement_site site, const std::string& sql, Elements&&... elements) {
    if (!site.unnamed) return ((site.session.prepare << sql), ..., std::forward<Elements>(elements));
    soci::statement st(site.session);
    (st.exchange(std::forward<Elements>(elements)), ...);
    st.alloc();
    st.prepare(sql, soci::details::st_one_time_query);
    st.define_and_bind();
    return st;
}

/// Like prepared, with the into elements of `intos` (a tuple) first.
template <class Tuple, class... Elements>
soci::statement prepared_with(statement_site s, const std::string& sql, Tuple intos, Elements&&... uses) {
    return std::apply([&](auto&&... into_elements) { return prepared(s, sql, into_elements..., std::forward<Elements>(uses)...); },
                      std::move(intos));
}

/// The select list matching instance_columns, and the into elements that receive it.
const std::string& instance_columns_sql();
inline auto into_instance(instance_columns& r) {
    return std::tuple{soci::into(r.id),         soci::into(r.name),         soci::into(r.context_id), soci::into(r.state),
                      soci::into(r.created_at), soci::into(r.retain_until), soci::into(r.remove_after, r.remove_after_null)};
}

/// INSERT ... ON CONFLICT DO NOTHING returning the new row, else the committed one.
struct instance_upsert {
    std::string name, context_id;
    long long created_at = 0, retain_until = 0;
    int skip_flush = 0;
    instance_columns row;
    int created = 0;  ///< 1 when this statement inserted the row
    soci::statement st;
    explicit instance_upsert(statement_site s);
};

/// A row's number as a parameter: NULL for a row of a sequence that is not numbered.
struct number_column {
    long long number = 0;
    soci::indicator number_null = soci::i_null;
};

/// A row without record (processed or failed on the direct path).
struct message_insert : number_column {
    long long instance = 0, created_at = 0, state_changed_at = 0;
    std::string type, idempotence_id, state;
    soci::statement st;
    explicit message_insert(statement_site s);
};

/// The parameters of a row with its record and headers.
struct message_columns : number_column {
    long long instance = 0, created_at = 0, state_changed_at = 0, offset = 0, record_time = 0;
    int partition = 0;
    std::string type, idempotence_id, state, cluster, topic, key, value, traceparent, headers;
    soci::indicator key_null = soci::i_ok, value_null = soci::i_ok, traceparent_null = soci::i_ok;
};

/// A row with its record and headers, in one statement.
struct message_insert_with_record : message_columns {
    soci::statement st;
    explicit message_insert_with_record(statement_site s);
};

/// seqinbox_store_message (schema V4): the row stored under its key's lock; `outcome` is
/// INSERTED, UPDATED or LEFT_EXISTING. The record columns count when `with_record` is 1. With
/// `skip_flush` 1 the transaction's commit does not wait for its WAL flush: only for an
/// autocommitted statement whose durability something else takes care of.
struct message_store : message_columns {
    int with_record = 0;
    int skip_flush = 0;
    std::string outcome;
    soci::statement st;
    explicit message_store(statement_site s);
};

struct transaction_id_query {
    long long id = 0;
    soci::statement st;
    explicit transaction_id_query(statement_site s);
};

}  // namespace seqinbox::postgresql::detail
