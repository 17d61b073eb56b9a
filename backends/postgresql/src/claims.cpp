// The claim path of the PostgreSQL store's transaction: claim and claim_batch (the claim, the
// instance lock, the key's rows and the instance's types in one round trip), deleting a claim,
// reading a key's rows.
#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::add_type;
using detail::checked;
using detail::claim_deletion;
using detail::from_microseconds;
using detail::microseconds_text;
using detail::parse_message_state;
using detail::throw_if_problem;
using detail::types_of;

void require_claim_key(const claim_key& key) { throw_if_problem(claim_key_problem(key.type, key.idempotence_id)); }

std::size_t queue_find(detail::pipeline& batch, const claim_key& key) {
    return batch.statement(detail::message_find_sql(), {key.type, key.idempotence_id});
}

/// The row at `row` of a result whose columns from `first` on are those of message_find_sql.
message_record found_row(const detail::result& r, int row, int first, const claim_key& key) {
    return {r.number(row, first), r.number(row, first + 1), key.type, key.idempotence_id, parse_message_state(r.text(row, first + 2)),
            from_microseconds(r.number(row, first + 3)), from_microseconds(r.number(row, first + 4)), std::nullopt,
            detail::number_or_null(r, row, first + 5)};
}

std::vector<message_record> found_rows(const detail::result& r, const claim_key& key) {
    std::vector<message_record> rows;
    for (int i = 0; i < r.rows(); ++i) rows.push_back(found_row(r, i, 0, key));
    return rows;
}

}  // namespace

// BEGIN, the claim and, when it is won, the lock of the instance, the key's rows and the
// instance's message types travel together in one round trip, each its own statement, so that
// the reads see what the lock's previous holder stored. A lost claim costs the server two cheap
// reads.
claim_result store::transaction::claim(const claim_request& request) {
    const claim_key& key = request.key;
    require_claim_key(key);
    auto& state = checked(impl_);
    const std::string id = std::to_string(request.instance);
    std::size_t claim = 0, rows = 0, lock = 0, types = 0;
    std::vector<detail::result> answers;
    try {
        answers = state.batch("claiming a message", [&](detail::pipeline& batch) {
            claim = batch.statement(detail::claim_insert_sql(), {key.type, key.idempotence_id, id, microseconds_text(request.now)});
            lock = batch.statement(detail::instance_lock_if_claimed_sql(), {id, key.type, key.idempotence_id});
            rows = queue_find(batch, key);
            types = batch.statement(detail::message_types_sql(), {id});
        });
    } catch (const error& e) {
        if (e.sqlstate() != instance_removed_sqlstate) throw;
        state.instance_removed(request.instance, e.sqlstate());
    }
    if (answers[claim].affected() != 1) return {};
    if (answers[lock].rows() != 1) state.instance_removed(request.instance);  // the claim's key-share lock forbids it
    claim_result won{true, {detail::instance_row(answers[lock]), types_of(answers[types])}, found_rows(answers[rows], key)};
    state.claim_won(key, !won.rows.empty());
    return won;
}

namespace {

/// The parameters of claim_batch_sql, in the order of the requests.
std::vector<detail::parameter> claim_batch_parameters(std::span<const claim_request> requests) {
    std::vector<std::string> types, ids, instances, times;
    for (const auto& r : requests) {
        types.push_back(r.key.type);
        ids.push_back(r.key.idempotence_id);
        instances.push_back(std::to_string(r.instance));
        times.push_back(microseconds_text(r.now));
    }
    return {detail::array_literal(types), detail::array_literal(ids), detail::array_literal(instances), detail::array_literal(times)};
}

/// The keys of a batch must be distinct (a second claim of a key in one statement would win too).
void require_distinct_keys(std::span<const claim_request> requests) {
    std::vector<const claim_key*> keys;
    for (const auto& r : requests) {
        require_claim_key(r.key);
        keys.push_back(&r.key);
    }
    std::ranges::sort(keys, {}, [](const claim_key* k) { return *k; });
    const auto twin = std::ranges::adjacent_find(keys, {}, [](const claim_key* k) { return *k; });
    if (twin != keys.end())
        throw error(error_category::misuse, "claim_batch: the key (" + (*twin)->type + ", " + (*twin)->idempotence_id +
                                                ") is requested twice; the keys of a batch must be distinct");
}

/// What a batch's three answers say, per won key.
struct batch_answers {
    std::map<claim_key, instance_id> won;
    std::map<instance_id, instance_lock> locks;
    std::map<claim_key, std::vector<message_record>> rows;
};

}  // namespace

// The claims and the instance locks in one statement, then the reads under the locks, each a
// statement of its own (so that they see what the locks' previous holders committed): one round
// trip with BEGIN and the deferred writes. Which claims are won is known only once they ran, so
// the reads cover every request: a lost claim costs the server two cheap index reads.
std::vector<claim_result> store::transaction::claim_batch(std::span<const claim_request> requests) {
    if (requests.empty()) return {};
    require_distinct_keys(requests);
    auto& state = checked(impl_);
    const auto params = claim_batch_parameters(requests);
    std::size_t claims = 0, rows = 0, types = 0;
    std::vector<detail::result> answers;
    try {
        answers = state.batch("claiming a batch of messages", [&](detail::pipeline& batch) {
            claims = batch.statement(detail::claim_batch_sql(), params);
            rows = batch.statement(detail::message_find_batch_sql(), {params[0], params[1]});
            types = batch.statement(detail::message_types_batch_sql(), {params[2]});
        });
    } catch (const error& e) {
        if (e.sqlstate() != instance_removed_sqlstate) throw;
        state.instances_removed(requests, e.sqlstate());
    }
    batch_answers found;
    const auto& won = answers[claims];
    for (int i = 0; i < won.rows(); ++i) {
        if (won.null(i, 2)) state.instances_removed(requests);  // the claim's key-share lock forbids it
        const auto instance = detail::instance_row(won, i, 2);
        found.won.emplace(claim_key{won.text(i, 0), won.text(i, 1)}, instance.id);
        found.locks.try_emplace(instance.id, instance_lock{instance, {{}, {}, 0}});
    }
    if (found.won.empty()) return std::vector<claim_result>(requests.size());
    const auto& type_rows = answers[types];
    for (int i = 0; i < type_rows.rows(); ++i)
        if (auto lock = found.locks.find(type_rows.number(i, 0)); lock != found.locks.end())
            add_type(lock->second.types, type_rows.text(i, 1), type_rows.text(i, 2), type_rows.number(i, 3));
    const auto& key_rows = answers[rows];
    for (int i = 0; i < key_rows.rows(); ++i) {
        claim_key key{key_rows.text(i, 0), key_rows.text(i, 1)};
        if (found.won.contains(key)) found.rows[key].push_back(found_row(key_rows, i, 2, key));
    }
    std::vector<claim_result> results;
    for (const auto& r : requests) {
        const auto won_on = found.won.find(r.key);
        if (won_on == found.won.end()) {
            results.emplace_back();
            continue;
        }
        results.push_back({true, found.locks.at(won_on->second), std::move(found.rows[r.key])});
        state.claim_won(r.key, !results.back().rows.empty());
    }
    return results;
}

void store::transaction::delete_claim(const claim_key& key) {
    require_claim_key(key);
    auto& state = checked(impl_);
    state.defer(claim_deletion{key});
    state.claim_deleted(key);
}

std::vector<message_record> store::transaction::find_messages(const claim_key& key) {
    require_claim_key(key);
    auto& state = checked(impl_);
    std::size_t rows = 0;
    const auto answers = state.batch("reading sequenced messages", [&](detail::pipeline& batch) { rows = queue_find(batch, key); });
    return found_rows(answers[rows], key);
}

}  // namespace seqinbox::postgresql
