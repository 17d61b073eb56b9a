// store::transaction::claim and claim_batch: the insert-first claim on InnoDB (see store.hpp).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codec.hpp"
#include "connection.hpp"
#include "locked_reads.hpp"
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

/// The length of `statements` sent together.
std::size_t total_length(const std::vector<detail::statement>& statements) {
    std::size_t length = 0;
    for (const auto& s : statements) length += s.sql.size() + 2;
    return length;
}

/// What a claim of `requests` is doing, for its errors.
std::string claiming(std::span<const claim_request> requests) {
    return requests.size() == 1 ? "claiming message " + requests[0].key.type + " " + requests[0].key.idempotence_id
                                : "claiming a batch of " + std::to_string(requests.size()) + " messages";
}

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

// One round trip: BEGIN (when fresh), the claim, the lock of the instances whose claims this
// transaction won (taken by the token it wrote: a lost claim locks nothing), then under those
// locks the instances with their types and the keys' rows, read for every key and kept for the
// won ones. A claim that fails stops the rest.
template <class OnClaimRow>
std::map<instance_id, instance_lock> store::transaction::claim_and_lock(std::span<const claim_request> requests, long long token,
                                                                        const std::vector<std::string>& values, OnClaimRow on_claim_row,
                                                                        std::vector<message_record>& rows) {
    std::vector<claim_key> keys;
    std::set<instance_id> instances;
    for (const auto& r : requests) {
        keys.push_back(r.key);
        instances.insert(r.instance);
    }
    const std::vector<instance_id> ids(instances.begin(), instances.end());
    std::map<instance_id, instance_lock> locks;
    std::vector<detail::statement> statements;
    statements.push_back({claim_sql(detail::listed(values, [](const std::string& v) { return v; })), on_claim_row});
    statements.push_back({detail::lock_won_instances_sql(keys, token)});
    detail::read_instances_with_types(ids, locks, statements);
    statements.push_back(detail::messages_with_keys(keys, rows));
    if (total_length(statements) > impl_->conn().max_query_bytes())
        return claim_and_lock_in_parts(requests, token, values, on_claim_row, rows);
    try {
        impl_->send(claiming(requests), std::move(statements));
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate)
            for (auto id : ids) impl_->pool().instances().forget(id);
        throw;
    }
    return locks;
}

// A claim whose SQL is more than one query may carry (thousands of keys with long ids): the claim
// inserts in parts that each fit, in key order as in one statement; then, the won keys known, the
// lock of their instances in id order, as the token's lock takes them, and the reads under it, in
// as many queries as they need. Two round trips or more where one query would be refused.
template <class OnClaimRow>
std::map<instance_id, instance_lock> store::transaction::claim_and_lock_in_parts(std::span<const claim_request> requests, long long token,
                                                                                 const std::vector<std::string>& values,
                                                                                 OnClaimRow on_claim_row, std::vector<message_record>& rows) {
    const std::size_t budget = impl_->conn().max_list_bytes();
    std::set<claim_key> won;
    const std::function<void(const detail::row&)> on_row = [&](const detail::row& row) {
        on_claim_row(row);
        if (detail::number_at(row, 2) == token) won.insert({detail::text_at(row, 0), detail::text_at(row, 1)});
    };
    std::vector<detail::statement> claims;
    for (const auto& part : detail::joined_within(values, ", ", budget)) claims.push_back({claim_sql(part), on_row});
    std::set<instance_id> instances;
    std::map<instance_id, instance_lock> locks;
    try {
        impl_->send(claiming(requests), std::move(claims));
        std::vector<claim_key> won_keys(won.begin(), won.end());
        for (const auto& r : requests)
            if (won.contains(r.key)) instances.insert(r.instance);
        if (instances.empty()) return locks;
        const std::vector<instance_id> ids(instances.begin(), instances.end());
        std::vector<detail::statement> reads{{detail::lock_instances_sql(ids)}};
        detail::read_instances_with_types(ids, locks, reads);
        for (auto& read : detail::messages_with_keys_within(won_keys, rows, budget)) reads.push_back(std::move(read));
        impl_->send(claiming(requests), std::move(reads));
    } catch (const error& e) {
        if (e.sqlstate() == instance_removed_sqlstate)
            for (const auto& r : requests) impl_->pool().instances().forget(r.instance);
        throw;
    }
    return locks;
}

claim_result store::transaction::claim_once(const claim_request& request) {
    const long long token = impl_->pool().next_claim_token();
    bool won = false;
    claim_result result;
    auto locks = claim_and_lock({&request, 1}, token, {claim_values(request, token)},
                                      [&](const detail::row& row) { won = detail::number_at(row, 2) == token; }, result.rows);
    if (!won) return {};
    detail::finish_instances({request.instance}, locks);
    result.won = true;
    result.locked = locks.at(request.instance);
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
    std::vector<std::string> values;
    for (std::size_t i : order) values.push_back(claim_values(requests[i], token));
    std::set<claim_key> won;
    std::vector<message_record> read;
    auto locks = claim_and_lock(
        requests, token, values,
        [&](const detail::row& row) {
            if (detail::number_at(row, 2) == token) won.insert({detail::text_at(row, 0), detail::text_at(row, 1)});
        },
        read);
    if (won.empty()) return results;
    std::vector<instance_id> won_instances;
    for (const auto& r : requests)
        if (won.contains(r.key)) won_instances.push_back(r.instance);
    detail::finish_instances(won_instances, locks);
    std::map<claim_key, std::vector<message_record>> rows;
    for (auto& row : read) rows[row.key()].push_back(std::move(row));
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (!won.contains(requests[i].key)) continue;
        results[i].won = true;
        results[i].locked = locks.at(requests[i].instance);
        if (auto it = rows.find(requests[i].key); it != rows.end()) results[i].rows = it->second;
    }
    return results;
}

}  // namespace seqinbox::mariadb
