#pragma once
// The one exception type of seqinbox. Normal outcomes (duplicate, buffered, not sequenced)
// are values, never exceptions; an error means the caller has to act.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqinbox {

/// What a caller can do about an error.
enum class error_category {
    misuse,           ///< the program used the API wrongly (fix the code)
    configuration,    ///< declarations or settings are invalid (fix the configuration)
    connection,       ///< the connection to the store was lost; the delivery was not acknowledged
    schema_mismatch,  ///< the database schema does not match this library version
    retryable,        ///< a transient condition (lock timeout, serialization); retry the delivery
    bad_message,      ///< a delivery cannot be interpreted (unknown type, undecodable payload)
    internal,         ///< an invariant of seqinbox itself was violated (a bug)
};

constexpr std::string_view to_string(error_category c) noexcept {
    switch (c) {
    case error_category::misuse: return "misuse";
    case error_category::configuration: return "configuration";
    case error_category::connection: return "connection";
    case error_category::schema_mismatch: return "schema_mismatch";
    case error_category::retryable: return "retryable";
    case error_category::bad_message: return "bad_message";
    case error_category::internal: return "internal";
    }
    return "unknown";
}

class error : public std::runtime_error {
public:
    error(error_category category, const std::string& message, std::string sqlstate = {})
        : std::runtime_error(message), category_(category), sqlstate_(std::move(sqlstate)) {}

    /// An error made of several problems (e.g. every invalid declaration found at once).
    error(error_category category, const std::string& summary, std::vector<std::string> details)
        : std::runtime_error(join(summary, details)), category_(category), details_(std::move(details)) {}

    error_category category() const noexcept { return category_; }
    /// SQLSTATE of a database error, empty otherwise.
    const std::string& sqlstate() const noexcept { return sqlstate_; }
    /// The individual problems, when the error collects several.
    const std::vector<std::string>& details() const noexcept { return details_; }

private:
    static std::string join(const std::string& summary, const std::vector<std::string>& details);

    error_category category_;
    std::string sqlstate_;
    std::vector<std::string> details_;
};

/// The text of the exception being handled (call it in a catch block), whatever its type.
std::string current_exception_text();

}  // namespace seqinbox
