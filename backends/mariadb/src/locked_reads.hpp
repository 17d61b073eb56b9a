#pragma once
// Private to seqinbox::mariadb: the statements a claim sends with it in one round trip (the
// instance locks, the instances with their types, the keys' rows), also used on their own.
#include <map>
#include <string>
#include <vector>

#include "result_row.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::mariadb::detail {

/// Locks the instances `ids` (ascending, distinct): the insert creates a missing lock row and
/// locks an existing one (its duplicate key), row by row in that order; its foreign key fails for
/// a removed instance.
std::string lock_instances_sql(const std::vector<instance_id>& ids);
/// The same for the instances of the claims of `keys` that carry `token` (those this
/// transaction won), in id order: nothing when every claim was lost.
std::string lock_won_instances_sql(const std::vector<claim_key>& keys, long long token);
/// Appends to `into` the reads of the instances `ids` and of the distinct types of their PROCESSED
/// and WAITING messages, into `locks` (an instance removed has no entry); finish_instances
/// completes `locks` once they ran.
void read_instances_with_types(const std::vector<instance_id>& ids, std::map<instance_id, instance_lock>& locks, std::vector<statement>& into);
/// Sorts every instance's types in `locks`; throws seqinbox::error(retryable, SQLSTATE 23503) for
/// an instance of `ids` missing from it.
void finish_instances(const std::vector<instance_id>& ids, std::map<instance_id, instance_lock>& locks);
/// Reads the rows of every key of `keys`, by id, without payloads, into `rows`.
statement messages_with_keys(const std::vector<claim_key>& keys, std::vector<message_record>& rows);
/// The same in as many statements as it takes for none to list more than `budget` bytes of keys
/// (each key's rows come from one of them, by id).
std::vector<statement> messages_with_keys_within(const std::vector<claim_key>& keys, std::vector<message_record>& rows, std::size_t budget);

}  // namespace seqinbox::mariadb::detail
