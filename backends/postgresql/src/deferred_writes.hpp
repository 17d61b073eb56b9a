#pragma once
// Private to seqinbox::postgresql: the writes a transaction defers until its next read or its
// commit (transaction_impl.hpp), how they travel (together in one round trip, or one by one), and
// store_row, the immediate store_message that shares their binding of message rows (messages.cpp).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "pipeline.hpp"
#include "pool.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql::detail {

// Writes whose result nobody reads wait for the transaction's next read or its commit.
struct claim_deletion {
    claim_key key;
};
struct message_insertion {
    message_record row;
};
/// store_message of a row whose outcome is known beforehand (see transaction::store_message).
struct message_storing {
    message_record row;
};
struct state_change {
    message_id id;
    message_state state;
    timestamp at;
};
struct instance_closing {
    instance_id id;
    timestamp at;
};
struct actions_clearing {
    instance_id instance;
    pending_actions read;
};
/// transaction::skip_numbers.
struct numbers_skipping {
    instance_id instance;
    std::int64_t through;
};
/// SAVEPOINT and RELEASE travel with the writes around them: a listener that sends nothing costs
/// no round trip for its savepoint (see transaction::impl::savepoint).
struct savepoint_taking {
    store::savepoint_id point;
    std::size_t depth;
};
struct savepoint_release {
    store::savepoint_id point;
    std::size_t depth;
};
using deferred_write = std::variant<claim_deletion, message_insertion, message_storing, state_change, instance_closing, actions_clearing,
                                    numbers_skipping, savepoint_taking, savepoint_release>;

/// Whether `w` travels in a batch (every write but the insertion of a row with its record).
bool batchable(const deferred_write& w);

/// Queues deferred writes in their order, the state changes, message stores and instance
/// closings grouped (deferred_writes.cpp).
void queue_writes(pipeline& batch, const std::vector<deferred_write>& writes);

/// Sends one deferred write on its own.
void execute(connection& c, const deferred_write& w);

/// What `w` does, for error messages.
const char* describe(const deferred_write& w);

/// message_storing sent at once: seqinbox_store_message's outcome.
stored_as store_row(connection& c, const message_record& row, commit_flush flush = commit_flush::wait);

}  // namespace seqinbox::postgresql::detail
