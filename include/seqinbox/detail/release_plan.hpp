#pragma once
// The bookkeeping of one release pass. Conditions are monotone (and/or of "type is PROCESSED"),
// so a waiting message that is not ready only needs another look when one of the predecessors
// it names becomes PROCESSED. Each message is therefore evaluated at most once per predecessor
// type it names, and the pass costs O(W log W) for W waiting messages instead of the O(W^2) of
// rescanning the waiting list after every release.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqinbox/declare/condition.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

/// The PROCESSED qualified types of one instance; a sequence has few types, so a flat vector.
class processed_set {
public:
    processed_set() = default;
    explicit processed_set(std::vector<std::string> types) : types_(std::move(types)) {}

    bool contains(const std::string& type) const;
    /// Returns true when `type` was not PROCESSED before.
    bool insert(const std::string& type);
    bool contains_all(const std::vector<std::string>& types) const;
    auto is_processed() const {
        return [this](const std::string& type) { return contains(type); };
    }

private:
    std::vector<std::string> types_;
};

class release_plan {
public:
    /// `condition_of(type)` returns the release condition of a qualified type.
    release_plan(std::function<const condition&(const std::string&)> condition_of, processed_set& processed)
        : condition_of_(std::move(condition_of)), processed_(&processed) {}

    /// Whether the waiting messages of `type` were fetched into this plan already.
    bool fetched(const std::string& type) const;
    /// `type` must outlive the plan (the engine passes names its catalog owns).
    void mark_fetched(const std::string& type);

    void add(message_record row);
    /// A row not stored yet (a batch's): it arrived after every stored row, `arrival`-th of those.
    void add_unstored(message_record row, std::size_t arrival);
    /// A row not stored yet that will be stored in the row `stored` (a FAILED row of its key): it
    /// arrived as that one did.
    void add_in_place_of(message_record row, message_id stored);

    bool has_ready() const { return !ready_.empty(); }

    /// The ready message that arrived first (stored rows by id, then unstored ones).
    message_record take_next();

    /// Records that `type` became PROCESSED and re-examines the messages waiting on it.
    /// Returns true when it was not PROCESSED before.
    bool mark_processed(const std::string& type);

private:
    /// Stored rows by id, then unstored rows by arrival.
    using arrival = std::pair<bool, std::int64_t>;

    struct entry {
        message_record row;
        arrival order;
        bool queued;
    };

    void add_entry(message_record row, arrival order);
    void evaluate(std::size_t index);

    using ready_item = std::pair<arrival, std::size_t>;
    std::function<const condition&(const std::string&)> condition_of_;
    processed_set* processed_;
    std::vector<const std::string*> fetched_;
    std::vector<entry> entries_;
    std::priority_queue<ready_item, std::vector<ready_item>, std::greater<>> ready_;
    std::unordered_map<std::string, std::vector<std::size_t>> parked_;
};

}  // namespace seqinbox::detail
