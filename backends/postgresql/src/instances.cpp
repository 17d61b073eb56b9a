// The PostgreSQL store's sequence instances: creating them or reading the existing ones (through
// the instance cache), the instance lock with the instance's message types, and the instance rows
// and types the other parts read.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "seqinbox/store/storable_text.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::checked;
using detail::commit_flush;
using detail::commit_flush_before_claim;
using detail::microseconds_text;
using detail::throw_if_problem;
using detail::to_instance;
using detail::to_microseconds;
using detail::types_of;

void require_key(std::string_view what, std::string_view value) { throw_if_problem(key_problem(what, value)); }

}  // namespace

sequence_instance detail::instance_row(const result& r, int row, int first) {
    const auto at = [&](int column) { return r.number(row, first + column); };
    detail::instance_columns c{at(0), r.text(row, first + 1), r.text(row, first + 2), r.text(row, first + 3), at(4), at(5), 0,
                               r.null(row, first + 6) ? soci::i_null : soci::i_ok};
    if (c.remove_after_null == soci::i_ok) c.remove_after = at(6);
    return to_instance(c);
}

void detail::add_type(types_by_state& types, std::string type, std::string_view state, long long rows) {
    const bool processed = detail::parse_message_state(state) == message_state::processed;
    (processed ? types.processed : types.waiting).push_back(std::move(type));
    if (!processed) types.waiting_rows = types.waiting_rows.value_or(0) + static_cast<std::size_t>(rows);
}

types_by_state detail::types_of(const detail::result& r) {
    types_by_state types{{}, {}, 0};
    for (int i = 0; i < r.rows(); ++i) add_type(types, r.text(i, 0), r.text(i, 1), r.number(i, 2));
    return types;
}

// The instance's types travel with the lock, a statement of their own: read once it was granted.
instance_lock store::transaction::lock_instance(instance_id instance) {
    auto& state = checked(impl_);
    const std::string id = std::to_string(instance);
    std::size_t lock = 0, types = 0;
    const auto answers = state.batch("locking a sequence instance", [&](detail::pipeline& batch) {
        lock = batch.statement(detail::instance_lock_sql(), {id});
        types = batch.statement(detail::message_types_sql(), {id});
    });
    if (answers[lock].rows() == 0) state.instance_removed(instance);
    return {detail::instance_row(answers[lock]), types_of(answers[types])};
}

types_by_state store::transaction::message_types(instance_id instance) {
    std::size_t types = 0;
    const auto answers = checked(impl_).batch("reading message types", [&](detail::pipeline& batch) {
        types = batch.statement(detail::message_types_sql(), {std::to_string(instance)});
    });
    return types_of(answers[types]);
}

sequence_instance store::create_or_get_instance(const std::string& sequence, const std::string& context_id,
                                                timestamp created_at, timestamp retain_until) {
    require_key("sequence name", sequence);
    require_key("context id", context_id);
    auto& cache = pool_->instances();
    if (auto known = cache.find(sequence, context_id)) return std::move(*known);
    transaction::impl autocommit(pool_, pool_->acquire());
    // A row committed by a concurrent insert after this statement's snapshot is invisible to it:
    // the next attempt sees it.
    for (int attempt = 0; attempt < 3; ++attempt) {
        auto found = autocommit.guarded("creating sequence instance", [&](detail::connection& c) -> std::optional<sequence_instance> {
            auto& s = c.statement<detail::instance_upsert>();
            s.name = sequence;
            s.context_id = context_id;
            s.created_at = to_microseconds(created_at);
            s.retain_until = to_microseconds(retain_until);
            s.skip_flush = commit_flush_before_claim(options()) == commit_flush::skip ? 1 : 0;
            if (!s.st.execute(true)) return std::nullopt;
            if (s.created == 1 && s.skip_flush == 1) pool_->counts().count_unflushed_commit();
            return to_instance(s.row);
        });
        if (found) {
            cache.remember(*found);
            return std::move(*found);
        }
    }
    throw error(error_category::retryable, "sequence instance (" + sequence + ", " + context_id + ") could not be created or read; retry");
}

namespace {

using instance_key = std::pair<std::string, std::string>;  // sequence, context id

/// The parameters of instance_upsert_batch_sql for `missing`.
std::vector<detail::parameter> instance_batch_parameters(const std::map<instance_key, const instance_creation*>& missing,
                                                         bool skip_flush) {
    std::vector<std::string> names, contexts, created, retained;
    for (const auto& [key, request] : missing) {
        names.push_back(key.first);
        contexts.push_back(key.second);
        created.push_back(microseconds_text(request->created_at));
        retained.push_back(microseconds_text(request->retain_until));
    }
    return {detail::array_literal(names), detail::array_literal(contexts), detail::array_literal(created), detail::array_literal(retained),
            skip_flush ? "1" : "0"};
}

}  // namespace

std::vector<sequence_instance> store::create_or_get_instances(std::span<const instance_creation> requests) {
    auto& cache = pool_->instances();
    std::map<instance_key, sequence_instance> found;
    std::map<instance_key, const instance_creation*> missing;
    for (const auto& r : requests) {
        require_key("sequence name", r.sequence);
        require_key("context id", r.context_id);
        instance_key key{r.sequence, r.context_id};
        if (found.contains(key) || missing.contains(key)) continue;
        if (auto known = cache.find(r.sequence, r.context_id)) found.emplace(std::move(key), std::move(*known));
        else missing.emplace(std::move(key), &r);
    }
    const bool skip_flush = commit_flush_before_claim(options()) == commit_flush::skip;
    std::optional<transaction::impl> autocommit;  // a connection only when the cache does not know them all
    if (!missing.empty()) autocommit.emplace(pool_, pool_->acquire());
    for (int attempt = 0; attempt < 3 && !missing.empty(); ++attempt) {
        const auto answer = autocommit->guarded("creating sequence instances", [&](detail::connection& c) {
            auto statements = c.batch();
            statements.statement(detail::instance_upsert_batch_sql(), instance_batch_parameters(missing, skip_flush));
            return statements.run().at(0);
        });
        for (int i = 0; i < answer.rows(); ++i) {
            auto instance = detail::instance_row(answer, i);
            if (answer.number(i, 7) == 1 && skip_flush) pool_->counts().count_unflushed_commit();
            cache.remember(instance);
            instance_key key{instance.sequence, instance.context_id};
            missing.erase(key);
            found.insert_or_assign(std::move(key), std::move(instance));
        }
    }
    if (!missing.empty())
        throw error(error_category::retryable, "sequence instance (" + missing.begin()->first.first + ", " +
                                                   missing.begin()->first.second + ") could not be created or read; retry");
    std::vector<sequence_instance> results;
    for (const auto& r : requests) results.push_back(found.at({r.sequence, r.context_id}));
    return results;
}

void store::forget_instance(instance_id id) { pool_->instances().forget(id); }

}  // namespace seqinbox::postgresql
