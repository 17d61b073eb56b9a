#pragma once
// Private to seqinbox::mariadb: the state of one store::transaction and the way its statements
// run: BEGIN before the first, and every failure turned into seqinbox::error with the
// transaction's state kept true (ended after a deadlock, a lock wait timeout or a lost
// connection).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <soci/soci.h>

#include "pool.hpp"
#include "seqinbox/mariadb/store.hpp"

namespace seqinbox::mariadb {

class store::transaction::impl {
public:
    impl(std::shared_ptr<detail::pool> owner, detail::lease conn);
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    ~impl();

    detail::pool& pool() { return *pool_; }
    detail::connection& conn() { return *conn_; }
    const std::string& url() const { return pool_->options().url; }

    /// `statements` inside the transaction in one round trip, BEGIN first when it has not begun;
    /// throws when it has ended.
    void send(std::string_view doing, std::vector<detail::statement> statements);
    /// send() of one statement: no rows, rows, or the affected-row count.
    void run(std::string_view doing, const std::string& sql);
    void rows(std::string_view doing, const std::string& sql, const std::function<void(const detail::row&)>& each);
    long long affected(std::string_view doing, const std::string& sql);
    /// Sends BEGIN now when the transaction has not begun (a listener's session needs it).
    void begin(std::string_view doing) { send(doing, {}); }

    /// Turns `e` into seqinbox::error and ends the transaction when the server ended it.
    [[noreturn]] void fail(const soci::soci_error& e, std::string_view doing);

    void commit();
    void rollback() noexcept;

    bool active() const noexcept { return active_; }
    /// No statement has been sent yet: a claim that starts here may be redone from BEGIN.
    bool fresh() const noexcept { return !begun_ && active_; }
    /// After the server rolled the transaction back (deadlock), starts over as if fresh.
    void restart() noexcept {
        begun_ = false;
        active_ = true;
        at_commit.clear();
    }
    std::uint64_t id() const noexcept { return (conn_->server_id() << 32) | number_; }
    std::uint32_t next_savepoint() noexcept { return ++savepoints_; }

    /// Statements sent with the COMMIT, in its round trip: (doing, sql). Writes of the
    /// sequence_instance row (see store.hpp), and the write of a state step in its own transaction.
    std::vector<std::pair<std::string, detail::statement>> at_commit;

private:
    /// Throws when the server rolled the transaction back behind the store's back.
    void check_still_open(std::string_view doing);
    /// Makes `statements` ready to send inside the transaction: throws when it has ended, puts
    /// BEGIN first when it has not begun (returning true).
    bool open_for(std::string_view doing, std::vector<detail::statement>& statements);

    std::shared_ptr<detail::pool> pool_;
    detail::lease conn_;
    std::uint32_t number_;
    std::uint32_t savepoints_ = 0;
    bool begun_ = false;
    bool active_ = true;
};

}  // namespace seqinbox::mariadb
