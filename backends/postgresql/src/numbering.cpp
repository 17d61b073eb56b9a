// Numbered sequences in the PostgreSQL store: the last released number, the WAITING numbered
// rows of an instance, skipped gaps, and the instances whose gaps may have timed out. The SQL is
// in statements.cpp; the indexes are V11's.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "deferred_writes.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::checked;

/// `limit` as a LIMIT parameter: a size beyond bigint means no limit.
std::string limit_text(std::size_t limit) {
    constexpr auto most = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    return std::to_string(std::min(limit, most));
}

}  // namespace

// With the deferred writes in the same round trip: it sees what this transaction stored.
std::optional<std::int64_t> store::transaction::last_released_number(instance_id instance) {
    std::size_t last = 0;
    const auto answers = checked(impl_).batch("reading the last released number", [&](detail::pipeline& batch) {
        last = batch.statement(detail::last_released_number_sql(), {std::to_string(instance)});
    });
    return detail::number_or_null(answers[last], 0, 0);
}

std::vector<message_record> store::transaction::waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit) {
    std::size_t rows = 0;
    const auto answers = checked(impl_).batch("reading waiting numbered messages", [&](detail::pipeline& batch) {
        rows = batch.statement(detail::waiting_numbered_sql(), {std::to_string(instance), std::to_string(from), limit_text(limit)});
    });
    return detail::waiting_rows(answers[rows]);
}

void store::transaction::skip_numbers(instance_id instance, std::int64_t through) {
    checked(impl_).defer(detail::numbers_skipping{instance, through});
}

void detail::queue_numbers_skipping(pipeline& batch, instance_id instance, std::int64_t through) {
    batch.statement(numbers_skip_sql(), {std::to_string(instance), std::to_string(through)});
}

std::vector<instance_id> store::stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after) {
    detail::throw_if_problem(key_problem("sequence name", sequence));
    if (limit == 0) return {};
    const auto found = autocommitted_statement("finding numbered instances waiting for a missing number", detail::stalled_numbered_sql(),
                                               {sequence, detail::microseconds_text(now), std::to_string(after.id), limit_text(limit)});
    std::vector<instance_id> ids;
    for (int i = 0; i < found.rows(); ++i) ids.push_back(found.number(i, 0));
    if (!ids.empty()) after.id = ids.back();
    return ids;
}

}  // namespace seqinbox::postgresql
