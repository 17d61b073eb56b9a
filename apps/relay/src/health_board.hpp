#pragma once
// Private to the relay: what /healthz reports. Each part (a consumer thread, the job schedule)
// records whether its last attempt worked; the relay is healthy when every part's did.
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "seqinbox/detail/escaped_text.hpp"

namespace seqinbox::relay::detail {

class health_board {
public:
    void fine(const std::string& part) { set(part, {}); }
    /// `why` is escaped: an error text of several lines (PostgreSQL's DETAIL) stays one line.
    void failing(const std::string& part, std::string_view why) { set(part, seqinbox::detail::loggable(why)); }

    /// True and "ok" when no part is failing; otherwise false and one `part: why` line per failing part.
    std::pair<bool, std::string> report() const {
        const std::scoped_lock lock(mutex_);
        std::string failures;
        for (const auto& [part, why] : problems_)
            if (!why.empty()) failures += part + ": " + why + "\n";
        if (failures.empty()) return {true, "ok\n"};
        return {false, failures};
    }

private:
    void set(const std::string& part, std::string why) {
        const std::scoped_lock lock(mutex_);
        problems_[part] = std::move(why);
    }

    mutable std::mutex mutex_;
    std::map<std::string, std::string> problems_;  ///< part -> why it failed last ("" = fine)
};

}  // namespace seqinbox::relay::detail
