// Sequenced messages in the PostgreSQL store: storing them (in a transaction, deferred when the
// outcome is known; autocommitted; beside a claim transaction) and reading the waiting ones with
// their records.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec.hpp"
#include "deferred_writes.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::checked;
using detail::commit_flush;
using detail::commit_flush_before_claim;
using detail::from_microseconds;
using detail::message_insertion;
using detail::message_storing;
using detail::store_row;
using detail::throw_if_problem;

void require_storable(const message_record& row) { throw_if_problem(storage_problem(row)); }

/// The instance id of a row of waiting_messages_batch_sql and waiting_messages_of_instances_sql.
constexpr int waiting_instance_column = 14;

/// A row of waiting_messages_sql, with its record.
message_record waiting_row(const detail::result& r, int row, instance_id instance) {
    const auto set = [&](int column, auto& field, auto convert) {
        if (!r.null(row, column)) field = convert(r.text(row, column));
    };
    const auto text = [](std::string t) { return t; };
    const auto number = [&](int column) { return r.number(row, column); };
    envelope record;
    set(5, record.cluster, text);
    set(6, record.topic, text);
    if (!r.null(row, 7)) record.partition = static_cast<std::int32_t>(number(7));
    if (!r.null(row, 8)) record.offset = number(8);
    set(9, record.key, [](const std::string& hex) { return detail::from_hex(hex); });
    set(10, record.value, [](const std::string& hex) { return detail::from_hex(hex); });
    if (!r.null(row, 11)) record.time = from_microseconds(number(11));
    record.headers = detail::decode_headers(r.text(row, 12));
    return {number(0), instance, r.text(row, 1), r.text(row, 2), message_state::waiting, from_microseconds(number(3)),
            from_microseconds(number(4)), std::move(record), detail::number_or_null(r, row, 13)};
}

}  // namespace

// With the deferred writes in one round trip: a release pass reads what the batch buffered.
std::vector<message_record> store::transaction::waiting_messages(instance_id instance, std::span<const std::string> types) {
    std::size_t rows = 0;
    const auto answers = checked(impl_).batch("reading waiting messages", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::waiting_messages_sql(), {std::to_string(instance), detail::array_literal(types)});
    });
    std::vector<message_record> found;
    for (int i = 0; i < answers[rows].rows(); ++i) found.push_back(waiting_row(answers[rows], i, instance));
    return found;
}

std::size_t store::transaction::count_waiting(instance_id instance, std::size_t up_to) {
    std::size_t count = 0;
    const auto answers = checked(impl_).batch("counting waiting messages", [&](detail::pipeline& batch) {
        count = batch.statement(detail::waiting_count_sql(), {std::to_string(instance), std::to_string(up_to)});
    });
    return static_cast<std::size_t>(answers[count].number(0, 0));
}

std::vector<std::vector<message_record>> store::transaction::waiting_messages(std::span<const waiting_query> queries) {
    std::vector<std::string> instances, types;
    for (const auto& q : queries)
        for (const auto& type : q.types) {
            instances.push_back(std::to_string(q.instance));
            types.push_back(type);
        }
    std::size_t rows = 0;
    const auto answers = checked(impl_).batch("reading waiting messages", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::waiting_messages_batch_sql(), {detail::array_literal(instances), detail::array_literal(types)});
    });
    std::vector<std::vector<message_record>> found(queries.size());
    for (const message_record& row : detail::waiting_rows(answers[rows])) {
        for (std::size_t k = 0; k < queries.size(); ++k)
            if (queries[k].instance == row.instance && std::ranges::find(queries[k].types, row.type) != queries[k].types.end())
                found[k].push_back(row);
    }
    return found;
}

std::vector<message_record> detail::waiting_rows(const result& r) {
    std::vector<message_record> found;
    for (int i = 0; i < r.rows(); ++i) found.push_back(waiting_row(r, i, r.number(i, waiting_instance_column)));
    return found;
}

void store::transaction::insert_message(message_record row) {
    require_storable(row);
    checked(impl_).defer(message_insertion{std::move(row)});
}

// A key this transaction claimed without rows has none until the store: its outcome is known,
// so the write waits for the next round trip (a batch of deliveries then costs a handful). Only
// a state step beside a dead claim transaction of the key could commit a row first (see
// store_message_beside): the function then leaves or updates that row as it would have, and
// only the outcome said here is wrong, nothing stored.
stored_as store::transaction::store_message(message_record row) {
    require_storable(row);
    auto& state = checked(impl_);
    if (state.take_unstored(row.key())) {
        state.defer(message_storing{std::move(row)});
        return stored_as::inserted;
    }
    return state.read("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row); });
}

stored_as store::store_message(message_record row) {
    require_storable(row);
    return autocommitted("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row); });
}

stored_as store::store_message_beside(transaction& claim, message_record row) {
    require_storable(row);
    auto& t1 = checked(claim.impl_);
    const commit_flush flush = commit_flush_before_claim(options());
    if (flush == commit_flush::skip) t1.step_beside_unflushed();  // also when the outcome is unknown: it may have committed
    const stored_as what = autocommitted("storing a sequenced message", [&](detail::connection& c) { return store_row(c, row, flush); });
    if (flush == commit_flush::skip) pool_->counts().count_unflushed_commit();
    return what;
}

}  // namespace seqinbox::postgresql
