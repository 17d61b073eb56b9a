// The writes a transaction defers (deferred_writes.hpp): binding message rows, queueing the
// writes of one round trip, sending one on its own.
#include "deferred_writes.hpp"

#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "codec.hpp"
#include "seqinbox/store/storable_text.hpp"

namespace seqinbox::postgresql::detail {

namespace {

/// A key or value as hex, or SQL NULL for a null one (kept apart from an empty one).
void bind_bytes(std::string& hex, soci::indicator& null, const record_bytes& bytes) {
    hex = bytes ? detail::to_hex(*bytes) : std::string();
    null = bytes ? soci::i_ok : soci::i_null;
}

void bind_record(detail::message_columns& s, const envelope& record) {
    s.cluster = record.cluster;
    s.topic = record.topic;
    s.partition = record.partition;
    s.offset = record.offset;
    bind_bytes(s.key, s.key_null, record.key);
    bind_bytes(s.value, s.value_null, record.value);
    // A column for operators only (the replay uses the headers): NULL when the value is no text.
    const auto traceparent = record.find_header(traceparent_header);
    const bool storable = traceparent && text_problem("traceparent", *traceparent).empty();
    s.traceparent = storable ? std::string(*traceparent) : std::string();
    s.traceparent_null = storable ? soci::i_ok : soci::i_null;
    s.record_time = to_microseconds(record.time);
    s.headers = detail::encode_headers(record.headers);
}

template <class Insert>
void bind_row(Insert& s, const message_record& row) {
    s.instance = row.instance;
    s.type = row.type;
    s.idempotence_id = row.idempotence_id;
    s.state = std::string(to_string(row.state));
    s.created_at = to_microseconds(row.created_at);
    s.state_changed_at = to_microseconds(row.state_changed_at);
    s.number = row.number.value_or(0);
    s.number_null = row.number ? soci::i_ok : soci::i_null;
}

void execute(detail::connection& c, const message_insertion& w) {
    if (!w.row.payload) {
        auto& s = c.statement<detail::message_insert>();
        bind_row(s, w.row);
        s.st.execute(true);
        return;
    }
    auto& s = c.statement<detail::message_insert_with_record>();
    bind_row(s, w.row);
    bind_record(s, *w.row.payload);
    s.st.execute(true);
}

}  // namespace

stored_as store_row(detail::connection& c, const message_record& row, commit_flush flush) {
    auto& s = c.statement<detail::message_store>();
    bind_row(s, row);
    s.skip_flush = flush == commit_flush::skip ? 1 : 0;
    s.with_record = row.payload ? 1 : 0;
    bind_record(s, row.payload.value_or(envelope{}));
    s.st.execute(true);
    return parse_stored_as(s.outcome);
}

namespace {

// The writes that travel in a batch (every one but the insertion of a row with its record).
void queue_write(detail::pipeline& batch, const claim_deletion& w) {
    batch.statement(detail::claim_delete_sql(), {w.key.type, w.key.idempotence_id});
}

detail::parameter or_null(const std::string& text, soci::indicator null) {
    return null == soci::i_ok ? detail::parameter(text) : std::nullopt;
}

// The parameters bind_row and bind_record give message_store, as text.
std::vector<detail::parameter> store_parameters(const message_record& row) {
    detail::message_columns c;
    bind_record(c, row.payload.value_or(envelope{}));
    return {std::to_string(row.instance), row.type, row.idempotence_id, std::string(to_string(row.state)),
            microseconds_text(row.created_at), microseconds_text(row.state_changed_at), row.payload ? "1" : "0", c.cluster,
            c.topic, std::to_string(c.partition), std::to_string(c.offset), or_null(c.key, c.key_null), or_null(c.value, c.value_null),
            or_null(c.traceparent, c.traceparent_null), std::to_string(c.record_time),
            c.headers, row.number ? detail::parameter(std::to_string(*row.number)) : std::nullopt};
}

/// Rows of parameters as one array parameter per column.
std::vector<detail::parameter> as_arrays(const std::vector<std::vector<detail::parameter>>& rows) {
    std::vector<detail::parameter> arrays;
    for (std::size_t column = 0; column < rows.front().size(); ++column) {
        std::vector<detail::parameter> items;
        for (const auto& row : rows) items.push_back(row[column]);
        arrays.push_back(detail::array_literal(items));
    }
    return arrays;
}

void queue_rows(detail::pipeline& batch, const detail::named_sql& sql, const std::vector<std::vector<detail::parameter>>& rows) {
    if (!rows.empty()) batch.statement(sql, as_arrays(rows));
}

void queue_write(detail::pipeline& batch, const actions_clearing& w) { detail::queue_actions_clearing(batch, w.instance, w.read); }

void queue_write(detail::pipeline& batch, const numbers_skipping& w) { detail::queue_numbers_skipping(batch, w.instance, w.through); }


/// Queues deferred writes in their order, but the state changes in one statement (the last of
/// each row's, in id order), the message stores in another and the instance closings in a third,
/// after the rest (finish()): no other deferred write touches their rows or columns (a key's
/// store is deferred once and its row has no id to change yet; the others delete claims and clear
/// actions).
struct write_queue {
    detail::pipeline& batch;
    std::vector<std::vector<detail::parameter>> stores{}, closings{};
    std::map<message_id, std::vector<detail::parameter>> states{};

    void operator()(const state_change& w) {
        states.insert_or_assign(w.id, std::vector<detail::parameter>{std::string(to_string(w.state)), microseconds_text(w.at), std::to_string(w.id)});
    }
    void operator()(const message_storing& w) { stores.push_back(store_parameters(w.row)); }
    void operator()(const instance_closing& w) { closings.push_back({microseconds_text(w.at), std::to_string(w.id)}); }
    void operator()(const message_insertion&) {}  // not batchable: sent on its own
    // The grouped writes stay on their side of a savepoint's bounds.
    void operator()(const savepoint_taking& w) {
        finish();
        batch.statement(detail::savepoint_sql(detail::savepoint_command::take, w.depth), {});
    }
    void operator()(const savepoint_release& w) {
        finish();
        batch.statement(detail::savepoint_sql(detail::savepoint_command::release, w.depth), {});
    }
    void operator()(const auto& w) { queue_write(batch, w); }

    void finish() {
        std::vector<std::vector<detail::parameter>> changes;
        for (auto& [id, change] : states) changes.push_back(std::move(change));
        queue_rows(batch, detail::message_states_update_sql(), changes);
        queue_rows(batch, detail::messages_store_sql(), stores);
        queue_rows(batch, detail::instances_close_sql(), closings);
        states.clear();
        stores.clear();
        closings.clear();
    }
};

}  // namespace

bool batchable(const deferred_write& w) { return !std::holds_alternative<message_insertion>(w); }

void queue_writes(detail::pipeline& batch, const std::vector<deferred_write>& writes) {
    write_queue queue{batch};
    for (const auto& w : writes) std::visit(queue, w);
    queue.finish();
}

/// Sends one deferred write on its own.
void execute(detail::connection& c, const deferred_write& w) {
    if (const auto* insertion = std::get_if<message_insertion>(&w)) return execute(c, *insertion);
    auto batch = c.batch();
    write_queue queue{batch};
    std::visit(queue, w);
    queue.finish();
    batch.run();
}

const char* describe(const deferred_write& w) {
    return std::visit(
        [](const auto& write) {
            using W = std::decay_t<decltype(write)>;
            if constexpr (std::is_same_v<W, claim_deletion>) return "deleting a claim";
            else if constexpr (std::is_same_v<W, message_insertion>) return "inserting a sequenced message";
            else if constexpr (std::is_same_v<W, message_storing>) return "storing a sequenced message";
            else if constexpr (std::is_same_v<W, state_change>) return "updating a sequenced message state";
            else if constexpr (std::is_same_v<W, actions_clearing>) return "clearing executed operator actions";
            else if constexpr (std::is_same_v<W, numbers_skipping>) return "recording skipped sequence numbers";
            else if constexpr (std::is_same_v<W, savepoint_taking>) return "creating a savepoint";
            else if constexpr (std::is_same_v<W, savepoint_release>) return "releasing a savepoint";
            else return "closing a sequence instance";
        },
        w);
}

}  // namespace seqinbox::postgresql::detail
