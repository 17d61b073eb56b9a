#pragma once
// Databases of ended test fixtures, emptied for the next fixture: creating and migrating a database
// costs about as much as a whole conformance case, emptying its tables milliseconds, and the batch
// differentials make hundreds of fixtures per program. Thread-safe.
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace seqinbox::test {

class database_pool {
public:
    /// `create` makes a new empty database and returns its connection string; `empty` empties the
    /// database of a connection string, throwing when it cannot.
    database_pool(std::function<std::string()> create, std::function<void(const std::string&)> empty)
        : create_(std::move(create)), empty_(std::move(empty)) {}

    /// The connection string of an empty database: an emptied one, or a new one.
    std::string take() {
        std::lock_guard lock(mutex_);
        if (free_.empty()) return create_();
        std::string connection = std::move(free_.back());
        free_.pop_back();
        return connection;
    }

    /// Empties `connection`'s database for a later take(), once nothing of its fixture is connected;
    /// one that cannot be emptied (a session left behind holding a lock) is not reused.
    void give_back(const std::string& connection) noexcept {
        try {
            empty_(connection);
            std::lock_guard lock(mutex_);
            free_.push_back(connection);
        } catch (const std::exception&) {
            // left as it is: a later take() creates a new database
        }
    }

private:
    std::function<std::string()> create_;
    std::function<void(const std::string&)> empty_;
    std::mutex mutex_;
    std::vector<std::string> free_;
};

/// A fixture's database, given back to its pool when the fixture ends: declare it before the
/// members that connect to it, so that their connections are closed first.
class pooled_database {
public:
    explicit pooled_database(database_pool& pool) : pool_(&pool), connection_(pool.take()) {}
    ~pooled_database() { pool_->give_back(connection_); }
    pooled_database(const pooled_database&) = delete;
    pooled_database& operator=(const pooled_database&) = delete;

    const std::string& connection() const noexcept { return connection_; }

private:
    database_pool* pool_;
    std::string connection_;
};

}  // namespace seqinbox::test
