#pragma once
// Private to seqinbox::mariadb: the reads of a numbered instance's progress, shared by the
// transaction (last_released_number) and the instance view (src/numbered.cpp).
#include <cstdint>
#include <optional>
#include <string>

#include "result_row.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::mariadb::detail {

/// One row: the highest PROCESSED number of `instance` (from the end of schema V4's index) and
/// the number it skipped through (its lock row); released_at reads it.
std::string last_released_sql(instance_id instance);
std::optional<std::int64_t> released_at(const row& r);
/// The distinct numbers of `instance`'s WAITING messages, ascending, at most `limit`.
std::string waiting_numbers_sql(instance_id instance, std::size_t limit);

}  // namespace seqinbox::mariadb::detail
