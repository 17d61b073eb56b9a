#include "pipeline.hpp"

#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include <soci/postgresql/soci-postgresql.h>

#include "seqinbox/error.hpp"
#include "statements.hpp"

namespace seqinbox::postgresql::detail {

namespace {

constexpr const char* connection_failure = "08006";

long long parse_number(const char* text) {
    long long n = 0;
    const char* end = text + std::strlen(text);
    const auto [stop, ec] = std::from_chars(text, end, n);
    if (ec != std::errc{} || stop != end)
        throw error(error_category::internal, "PostgreSQL answered '" + std::string(text) + "' where a number was expected");
    return n;
}

}  // namespace

long long result::number(int row, int column) const { return parse_number(PQgetvalue(r_.get(), row, column)); }

long long result::affected() const {
    const char* text = PQcmdTuples(r_.get());
    return *text == '\0' ? 0 : parse_number(text);
}

std::size_t pipeline::statement(const named_sql& s, std::vector<parameter> params) {
    if (!rules_->unnamed && !prepared_->contains(s.name) && preparing_.insert(s.name).second) queued_.push_back({&s, nullptr, {}});
    queued_.push_back({nullptr, &s, std::move(params)});
    answers_.push_back(queued_.size() - 1);
    return answers_.size() - 1;
}

void pipeline::send(const queued& q) {
    int sent = 0;
    if (q.prepare != nullptr) {
        sent = PQsendPrepare(conn_, q.prepare->name.c_str(), q.prepare->text.c_str(), 0, nullptr);
    } else {
        std::vector<const char*> values;
        for (const auto& p : q.params) values.push_back(p ? p->c_str() : nullptr);
        const int count = static_cast<int>(values.size());
        sent = rules_->unnamed
                   ? PQsendQueryParams(conn_, q.statement->text.c_str(), count, nullptr, values.data(), nullptr, nullptr, 0)
                   : PQsendQueryPrepared(conn_, q.statement->name.c_str(), count, values.data(), nullptr, nullptr, 0);
    }
    if (sent != 1) lost();
}

// Treated as a lost connection, so that the pool drops it: libpq failed to send or answered
// out of protocol.
void pipeline::lost() {
    const char* message = PQerrorMessage(conn_);
    throw soci::postgresql_soci_error(*message != '\0' ? message : "the PostgreSQL connection failed", connection_failure);
}

void pipeline::queue_local_settings() {
    if (rules_->local_settings == nullptr || queued_.empty() || PQtransactionStatus(conn_) != PQTRANS_IDLE) return;
    const std::size_t at = queued_.front().statement == &begin_sql() ? 1 : 0;
    queued_.insert(queued_.begin() + static_cast<std::ptrdiff_t>(at), {nullptr, rules_->local_settings, rules_->local_settings_params});
    for (auto& answer : answers_)
        if (answer >= at) ++answer;
}

std::vector<result> pipeline::run() {
    queue_local_settings();
    if (PQenterPipelineMode(conn_) != 1) lost();
    for (const auto& q : queued_) send(q);
    if (PQpipelineSync(conn_) != 1) lost();
    std::vector<result> all;
    std::optional<std::pair<std::string, std::string>> failure;  // message, SQLSTATE
    for (const auto& q : queued_) {
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) lost();
        all.emplace_back(r);
        if (PGresult* more = PQgetResult(conn_)) {  // each statement's answer ends with a null
            PQclear(more);
            lost();
        }
        const auto status = PQresultStatus(r);
        if (status == PGRES_FATAL_ERROR && !failure) {
            const char* sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            const bool gone = PQstatus(conn_) != CONNECTION_OK;
            failure.emplace(PQresultErrorMessage(r), sqlstate != nullptr ? sqlstate : gone ? connection_failure : "XX000");
        }
        if (status == PGRES_COMMAND_OK && q.prepare != nullptr) prepared_->insert(q.prepare->name);
    }
    PGresult* sync = PQgetResult(conn_);
    const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!synced || PQexitPipelineMode(conn_) != 1) lost();
    if (failure) throw soci::postgresql_soci_error(failure->first, failure->second.c_str());
    std::vector<result> answers;
    for (std::size_t at : answers_) answers.push_back(all[at]);
    return answers;
}

}  // namespace seqinbox::postgresql::detail
