// store::transaction::claim and claim_batch: the insert-first claim on InnoDB (see store.hpp).
#include <algorithm>
#include <map>
#include <set>

#include "codec.hpp"
#include "connection.hpp"
#include "seqinbox/error.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::mariadb {

namespace {

/// One row of the claim insert's VALUES list.
std::string claim_values(const claim_request& r, long long token) {
    return "(" + detail::bytes_literal(r.key.type) + ", " + detail::bytes_literal(r.key.idempotence_id) + ", " +
           std::to_string(r.instance) + ", " + detail::time_literal(r.now) + ", " + std::to_string(token) + ")";
}

/// The claim statement of `values`: a duplicate key is the one conflict it tolerates (it then
/// updates nothing and locks the existing row); RETURNING gives every row's token afterwards.
std::string claim_sql(const std::string& values) {
    return "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at, claim_token)"
           " VALUES " + values + " ON DUPLICATE KEY UPDATE message_type = message_type RETURNING message_type, idempotence_id, claim_token";
}

/// How often a claim that began its transaction is redone after a deadlock.
constexpr int claim_attempts = 5;

}  // namespace

// A claim waiting for the instance lock holds the instance row shared (its foreign key check), and
// the lock's holder closing the instance at its commit needs that row exclusively: InnoDB breaks
// the cycle by rolling one back, usually the claimant, which has written least. When the claim
// began its transaction, nothing else was lost: it is redone from BEGIN.
template <class Claim>
auto store::transaction::redone_after_deadlock(Claim claim) {
    const bool fresh = impl_->fresh();
    for (int attempt = 1;; ++attempt) {
        try {
            return claim();
        } catch (const error& e) {
            if (!fresh || attempt == claim_attempts || e.sqlstate() != "40001" || impl_->active()) throw;
            impl_->restart();
        }
    }
}

claim_result store::transaction::claim(const claim_request& request) {
    return redone_after_deadlock([&] { return claim_once(request); });
}

std::vector<claim_result> store::transaction::claim_batch(std::span<const claim_request> requests) {
    return redone_after_deadlock([&] { return claim_batch_once(requests); });
}

claim_result store::transaction::claim_once(const claim_request& request) {
    const long long token = impl_->pool().next_claim_token();
    bool won = false;
    try {
        impl_->rows("claiming message " + request.key.type + " " + request.key.idempotence_id,
                    claim_sql(claim_values(request, token)),
                    [&](const soci::row& row) { won = detail::number_at(row, 2) == token; });
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate) impl_->pool().instances().forget(request.instance);
        throw;
    }
    if (!won) return {};
    claim_result result;
    result.won = true;
    result.locked = lock_instance(request.instance);
    result.rows = find_messages(request.key);
    return result;
}

std::vector<claim_result> store::transaction::claim_batch_once(std::span<const claim_request> requests) {
    std::vector<claim_result> results(requests.size());
    if (requests.empty()) return results;
    // Keys in key order (bytewise, as the primary key sorts VARBINARY), so that two batches take
    // their claim locks in one order.
    std::vector<std::size_t> order(requests.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return requests[a].key < requests[b].key; });
    for (std::size_t i = 1; i < order.size(); ++i)
        if (requests[order[i]].key == requests[order[i - 1]].key)
            throw error(error_category::misuse, "claim_batch: message " + requests[order[i]].key.type + " " +
                                                    requests[order[i]].key.idempotence_id + " is requested twice");

    const long long token = impl_->pool().next_claim_token();
    std::string values;
    for (std::size_t i : order) values += (values.empty() ? "" : ", ") + claim_values(requests[i], token);
    std::set<claim_key> won;
    try {
        impl_->rows("claiming a batch of " + std::to_string(requests.size()) + " messages", claim_sql(values), [&](const soci::row& row) {
            if (detail::number_at(row, 2) == token) won.insert({detail::text_at(row, 0), detail::text_at(row, 1)});
        });
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate)
            for (const auto& r : requests) impl_->pool().instances().forget(r.instance);
        throw;
    }
    if (won.empty()) return results;

    // The won claims' instances, each locked once, in id order; then under those locks their
    // types and the won keys' rows.
    std::set<instance_id> instances;
    for (const auto& r : requests)
        if (won.contains(r.key)) instances.insert(r.instance);
    const auto locks = lock_instances(std::vector<instance_id>(instances.begin(), instances.end()));
    std::map<claim_key, std::vector<message_record>> rows;
    for (auto& row : messages_with_keys(std::vector<claim_key>(won.begin(), won.end()))) rows[row.key()].push_back(std::move(row));
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (!won.contains(requests[i].key)) continue;
        results[i].won = true;
        results[i].locked = locks.at(requests[i].instance);
        if (auto it = rows.find(requests[i].key); it != rows.end()) results[i].rows = it->second;
    }
    return results;
}

}  // namespace seqinbox::mariadb
