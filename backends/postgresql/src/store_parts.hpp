#pragma once
// Private to seqinbox::postgresql: what the files of the store share. store.cpp holds the store's
// construction and the ways to a connection, transaction.cpp the transaction (its state in
// transaction_impl.hpp, the writes it defers in deferred_writes.hpp), claims.cpp the claim path,
// instances.cpp the sequence instances, messages.cpp the storing and waiting reads of messages,
// numbering.cpp what numbered sequences add, actions.cpp the operator actions, housekeeping.cpp
// the housekeeping jobs, views.cpp the read views; each keeps its SQL beside the operation that
// runs it (numbering.cpp's is in statements.cpp, beside the transaction's). actions.cpp,
// housekeeping.cpp and views.cpp reach a connection only through store::run_autocommitted and
// store::run_in (defined in store.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <soci/soci.h>

#include "codec.hpp"
#include "pipeline.hpp"
#include "pool.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "statements.hpp"

namespace seqinbox::postgresql {

namespace detail {

/// Runs `row` after executing `st`, once per fetched row.
template <class Row>
void for_each_row(soci::statement& st, Row&& row) {
    for (bool more = st.execute(true); more; more = st.fetch()) row();
}

inline sequence_instance to_instance(const instance_columns& c) {
    sequence_instance row{c.id,
                          c.name,
                          c.context_id,
                          parse_instance_state(c.state),
                          from_microseconds(c.created_at),
                          from_microseconds(c.retain_until),
                          {}};
    if (c.remove_after_null == soci::i_ok) row.remove_after = from_microseconds(c.remove_after);
    return row;
}

/// The engine rejects such values before they reach a store; this guards direct callers.
inline void throw_if_problem(std::string problem) {
    if (!problem.empty()) throw error(error_category::bad_message, std::move(problem));
}

/// Whether a commit waits for its WAL flush (synchronous_commit) or leaves that to a later one.
enum class commit_flush { wait, skip };

/// For the commits the claim transaction's commit flushes after them (store_options::flush_every_commit).
inline commit_flush commit_flush_before_claim(const store_options& options) {
    return options.flush_every_commit ? commit_flush::wait : commit_flush::skip;
}

/// The instance at `row` of a result whose columns from `first` on are instance_columns_sql() (instances.cpp).
sequence_instance instance_row(const result& r, int row = 0, int first = 0);

/// Adds `type` to the list of its `state`, and its `rows` to the WAITING count (instances.cpp).
void add_type(types_by_state& types, std::string type, std::string_view state, long long rows);

/// The types of a result of message_types_sql, by state (instances.cpp).
types_by_state types_of(const result& r);

/// The rows of waiting_messages_batch_sql or waiting_messages_of_instances_sql (messages.cpp).
std::vector<message_record> waiting_rows(const result& r);

/// Queues the statements that clear the requests of `read` on `instance` still as read
/// (actions.cpp): run with the commit of the transaction that executed them.
void queue_actions_clearing(pipeline& batch, instance_id instance, const pending_actions& read);

/// Queues the statement that records the instance's gaps as skipped up to `through` (numbering.cpp).
void queue_numbers_skipping(pipeline& batch, instance_id instance, std::int64_t through);

/// The number at (`row`, `column`), empty for NULL: a row's sequence number.
inline std::optional<std::int64_t> number_or_null(const result& r, int row, int column) {
    if (r.null(row, column)) return std::nullopt;
    return r.number(row, column);
}

}  // namespace detail

template <class Op>
auto store::autocommitted(std::string_view doing, Op&& op) {
    std::optional<std::invoke_result_t<Op&, detail::connection&>> answer;
    run_autocommitted(doing, [&](detail::connection& c) { answer.emplace(op(c)); });
    return std::move(*answer);
}

template <class... Keys>
std::optional<sequence_instance> store::one_instance(transaction& tx, std::string_view doing, const std::string& where,
                                                     const Keys&... keys) {
    std::optional<sequence_instance> instance;
    run_in(tx, doing, [&](detail::connection& c) {
        detail::instance_columns row;
        soci::statement st = detail::prepared_with(c.site(), "SELECT " + detail::instance_columns_sql() + " FROM sequence_instance WHERE " + where,
                                                   detail::into_instance(row), soci::use(keys)...);
        if (st.execute(true)) instance = detail::to_instance(row);
    });
    return instance;
}

template <class... Values>
std::vector<sequence_instance> store::instances_where(std::string_view doing, const std::string& sql, std::size_t limit,
                                                      const Values&... values) {
    return autocommitted(doing, [&](detail::connection& c) {
        detail::instance_columns row;
        const auto max_rows = static_cast<long long>(limit);
        soci::statement st = detail::prepared_with(c.site(), sql, detail::into_instance(row), soci::use(values)..., soci::use(max_rows));
        std::vector<sequence_instance> rows;
        detail::for_each_row(st, [&] { rows.push_back(detail::to_instance(row)); });
        return rows;
    });
}

}  // namespace seqinbox::postgresql
