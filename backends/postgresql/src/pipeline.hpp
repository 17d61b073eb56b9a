#pragma once
// Private to seqinbox::postgresql: statements sent together in one round trip (libpq pipeline
// mode) on the libpq connection of a SOCI session. Each statement still runs on its own, so under
// READ COMMITTED each one reads with a snapshot taken after the previous one finished (a read
// queued behind a row lock sees what the lock holder committed). A failing statement makes the
// server skip the rest of the batch.
#include <libpq-fe.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace seqinbox::postgresql::detail {

/// A statement prepared under a name of its own on every connection that runs it (SOCI names
/// its statements st_1, st_2, ...). Parameters are $1, $2, ... in text form.
struct named_sql {
    std::string name;
    std::string text;
};

/// A parameter in text form; nullopt is SQL NULL.
using parameter = std::optional<std::string>;

/// How a connection sends its statements. Directly to PostgreSQL each named_sql is prepared once
/// per connection under its name. Through a transaction pooler (store_options::through) nothing
/// may outlive a transaction: statements go unnamed (parsed each time, in the same round trip),
/// and the settings a direct connection SETs once travel as `local_settings` (set_config(...,
/// true) with these parameters) at the start of every transaction the pipeline begins.
struct sending_rules {
    bool unnamed = false;
    const named_sql* local_settings = nullptr;
    std::vector<parameter> local_settings_params;
};

/// The rows of one statement of a batch, as text.
class result {
public:
    explicit result(PGresult* r) : r_(r, PQclear) {}

    int rows() const { return PQntuples(r_.get()); }
    bool null(int row, int column) const { return PQgetisnull(r_.get(), row, column) != 0; }
    std::string text(int row, int column) const { return PQgetvalue(r_.get(), row, column); }
    long long number(int row, int column) const;
    /// Rows inserted, updated or deleted.
    long long affected() const;

private:
    friend class pipeline;
    std::shared_ptr<PGresult> r_;
};

/// Statements queued locally, sent with one sync by run().
class pipeline {
public:
    /// `prepared` lists the named statements this connection has prepared; run() adds to it.
    /// `rules` outlives the pipeline.
    pipeline(PGconn* conn, std::set<std::string>& prepared, const sending_rules& rules)
        : conn_(conn), prepared_(&prepared), rules_(&rules) {}

    /// Queues `s` with `params`, preparing it first on a connection that has not; returns its
    /// index in run()'s answer.
    std::size_t statement(const named_sql& s, std::vector<parameter> params);
    bool empty() const noexcept { return queued_.empty(); }

    /// Sends the batch and waits for every answer: the results in the order queued. Throws
    /// soci::postgresql_soci_error for the first statement that failed (SQLSTATE class 08 when
    /// the connection was lost), after reading the whole answer.
    std::vector<result> run();

private:
    struct queued {
        const named_sql* prepare = nullptr;  ///< set for the PREPARE of a statement
        const named_sql* statement = nullptr;
        std::vector<parameter> params;
    };

    void send(const queued& q);
    /// Queues rules_->local_settings where the transaction starts: after a leading BEGIN, or first
    /// when the statements run in an implicit transaction of their own.
    void queue_local_settings();
    [[noreturn]] void lost();

    PGconn* conn_;
    std::set<std::string>* prepared_;
    const sending_rules* rules_;
    std::set<std::string> preparing_;
    std::vector<queued> queued_;
    std::vector<std::size_t> answers_;  ///< per statement, its position among everything queued
};

}  // namespace seqinbox::postgresql::detail
