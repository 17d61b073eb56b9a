// Numbered sequences: the released number and the WAITING messages by number (store::transaction),
// the instances whose gap may have timed out (store, housekeeping). Schema V4.
#include <algorithm>
#include <limits>

#include "codec.hpp"
#include "connection.hpp"
#include "numbered_reads.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

namespace {

std::string limited(std::size_t limit) {
    return std::to_string(std::min<std::size_t>(limit, static_cast<std::size_t>(std::numeric_limits<long long>::max())));
}

}  // namespace

std::string detail::last_released_sql(instance_id instance) {
    const std::string id = std::to_string(instance);
    return "SELECT (SELECT MAX(m.sequence_number) FROM sequenced_message m WHERE m.sequence_instance_id = " + id +
           " AND m.state = 'PROCESSED'), (SELECT l.skipped_through FROM sequence_instance_lock l WHERE l.sequence_instance_id = " + id + ")";
}

std::optional<std::int64_t> detail::released_at(const row& r) {
    std::optional<std::int64_t> last;
    for (std::size_t i = 0; i < 2; ++i) {
        if (null_at(r, i)) continue;
        const std::int64_t n = number_at(r, i);
        last = std::max(last.value_or(n), n);
    }
    return last;
}

std::string detail::waiting_numbers_sql(instance_id instance, std::size_t limit) {
    return "SELECT DISTINCT sequence_number FROM sequenced_message WHERE sequence_instance_id = " + std::to_string(instance) +
           " AND state = 'WAITING' AND sequence_number IS NOT NULL ORDER BY sequence_number LIMIT " + limited(limit);
}

// One statement, read from V4's index and the lock row.
std::optional<std::int64_t> store::transaction::last_released_number(instance_id instance) {
    std::optional<std::int64_t> last;
    impl_->rows("reading the last number released in sequence instance " + std::to_string(instance), detail::last_released_sql(instance),
                [&](const detail::row& r) { last = detail::released_at(r); });
    return last;
}

// A range of V4's index in its order (number, then id, the index's tail).
std::vector<message_record> store::transaction::waiting_numbered(instance_id instance, std::int64_t from, std::size_t limit) {
    std::vector<message_record> rows;
    if (limit == 0) return rows;
    impl_->rows("reading the waiting messages of sequence instance " + std::to_string(instance) + " by number",
                "SELECT " + detail::message_columns_with_record() + " FROM sequenced_message m WHERE m.sequence_instance_id = " +
                    std::to_string(instance) + " AND m.state = 'WAITING' AND m.sequence_number >= " + std::to_string(from) +
                    " ORDER BY m.sequence_number, m.id LIMIT " + limited(limit),
                [&](const detail::row& r) { rows.push_back(detail::message_at(r, true)); });
    return rows;
}

// On the lock row, which the caller's instance lock holds already (the upsert takes it otherwise):
// no write of the sequence_instance row, which claims' foreign key checks hold shared.
void store::transaction::skip_numbers(instance_id instance, std::int64_t through) {
    const std::string value = std::to_string(through);
    impl_->run("skipping the numbers of sequence instance " + std::to_string(instance) + " through " + value,
               "INSERT INTO sequence_instance_lock (sequence_instance_id, skipped_through) VALUES (" + std::to_string(instance) + ", " +
                   value + ") ON DUPLICATE KEY UPDATE skipped_through = GREATEST(COALESCE(skipped_through, " + value + "), " + value + ")");
}

// The sequence's OPEN instances in id order from V4's (name, state, id) index, each probed by
// its WAITING numbered messages.
std::vector<instance_id> store::stalled_numbered(const std::string& sequence, timestamp now, std::size_t limit, scan_position& after) {
    if (limit == 0) return {};
    auto ids = detail::autocommitted(*pool_, "finding numbered instances waiting for a number", [&](detail::connection& c) {
        std::vector<instance_id> found;
        c.rows("SELECT i.id FROM sequence_instance i WHERE i.name = " + detail::bytes_literal(sequence) + " AND i.state = 'OPEN' AND i.id > " +
                   std::to_string(after.id) +
                   " AND EXISTS (SELECT 1 FROM sequenced_message m WHERE m.sequence_instance_id = i.id AND m.state = 'WAITING'"
                   " AND m.sequence_number IS NOT NULL AND m.created_at <= " + detail::time_literal(now) + ") ORDER BY i.id LIMIT " +
                   limited(limit),
               [&](const detail::row& r) { found.push_back(detail::number_at(r, 0)); });
        return found;
    });
    if (!ids.empty()) after.id = ids.back();
    return ids;
}

}  // namespace seqinbox::mariadb
