#pragma once
// Private to seqinbox::mariadb: a row of a result as the MariaDB client returns it (every value
// as bytes, NULL apart), and one statement of a multi-statement send with what its result is for.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace seqinbox::mariadb::detail {

/// A row of a stored result; valid while the callback it is given to runs.
class row {
public:
    row(char** values, const unsigned long* lengths, std::size_t columns) noexcept
        : values_(values), lengths_(lengths), columns_(columns) {}

    std::size_t size() const noexcept { return columns_; }
    bool null(std::size_t i) const noexcept { return values_[i] == nullptr; }
    /// The bytes of column `i` (empty for NULL).
    std::string_view bytes(std::size_t i) const noexcept {
        return null(i) ? std::string_view{} : std::string_view(values_[i], lengths_[i]);
    }

private:
    char** values_;
    const unsigned long* lengths_;
    std::size_t columns_;
};

/// One statement of connection::send: its rows go to `each`, its affected-row count (found rows)
/// to `*affected`; either may be left out.
struct statement {
    std::string sql;
    std::function<void(const row&)> each = {};
    long long* affected = nullptr;
};

}  // namespace seqinbox::mariadb::detail
