#pragma once
// Read views for operators (docs/operations.md): counts per state and type, expired, expiring
// and longest-waiting instances, one instance with a page of its messages, one message by id or
// key. Committed state only; a store that offers them models `view_store`.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

struct instance_count {
    std::string sequence;
    instance_state state = instance_state::open;
    std::size_t count = 0;
};

struct message_count {
    std::string type;  ///< qualified type
    message_state state = message_state::waiting;
    std::size_t count = 0;
};

/// OPEN instances of one sequence past `share` of their retention (expiring) or all of it (expired).
struct retention_count {
    std::string sequence;
    std::size_t expiring = 0;
    std::size_t expired = 0;
};

/// The page of an instance's messages that the operator API and CLI show unless asked otherwise,
/// and the largest they ask for: an instance may hold any number of messages (issue 34: 200,000
/// made one view 43 MB of JSON).
inline constexpr std::size_t default_message_page = 100;
inline constexpr std::size_t max_message_page = 1000;

/// Which of an instance's messages a view holds: the first `limit` (at least 1) by id after
/// message `after`.
struct message_page {
    std::size_t limit = default_message_page;
    message_id after = 0;  ///< the `next` of the page before; 0 for the first page
};

/// How many of an instance's messages are in each state.
struct message_state_counts {
    std::size_t waiting = 0;
    std::size_t processed = 0;
    std::size_t failed = 0;

    std::size_t total() const noexcept { return waiting + processed + failed; }
    std::size_t& operator[](message_state s) noexcept {
        return s == message_state::waiting ? waiting : s == message_state::processed ? processed : failed;
    }
    std::size_t operator[](message_state s) const noexcept {
        return s == message_state::waiting ? waiting : s == message_state::processed ? processed : failed;
    }
};

/// The most WAITING numbers an instance view lists (numbered sequences): the gaps before them
/// are what an operator looks for, and an instance may hold up to maxWaiting of them.
inline constexpr std::size_t max_waiting_numbers_shown = 100;

/// Where a numbered instance stands: the highest number released (or skipped through; none when
/// neither) and its lowest WAITING numbers, ascending, at most max_waiting_numbers_shown of them.
/// Empty for an instance without numbered messages.
struct numbered_progress {
    std::optional<std::int64_t> last_released;
    std::vector<std::int64_t> waiting;
};

/// The numbers missing before `progress.waiting`'s numbers, as [from, to] ranges, at most
/// `limit` of them: from the one after the last released, or from `first_number` (the declared
/// first number, when the caller knows it) when none was released; else from the first waiting.
inline std::vector<std::pair<std::int64_t, std::int64_t>> missing_numbers(const numbered_progress& progress,
                                                                          std::optional<std::int64_t> first_number = std::nullopt,
                                                                          std::size_t limit = max_waiting_numbers_shown) {
    std::vector<std::pair<std::int64_t, std::int64_t>> gaps;
    std::optional<std::int64_t> expected = progress.last_released ? std::optional(*progress.last_released + 1) : first_number;
    for (std::int64_t n : progress.waiting) {
        if (gaps.size() >= limit) break;
        if (expected && n > *expected) gaps.emplace_back(*expected, n - 1);
        if (!expected || n >= *expected) expected = n + 1;
    }
    return gaps;
}

/// One instance with a page of its messages (without payloads), by id, and the pending actions
/// on the instance and on the messages of the page (their number is bounded by the page too).
struct instance_view {
    sequence_instance instance;
    std::vector<message_record> messages;
    pending_actions actions;
    std::optional<message_id> next;  ///< the `after` of the next page; none when no message follows
    message_state_counts counts;     ///< of all the instance's messages, not only the page's
    numbered_progress numbering{};   ///< numbered sequences only
};

/// A page of no message is a question without an answer: refused as misuse, naming the value.
inline void check_page(const message_page& page) {
    if (page.limit == 0) throw error(error_category::misuse, "a page of an instance's messages needs a limit of at least 1, not 0");
}

/// One message (without payload), its instance, and its pending request if any.
struct message_view {
    message_record message;
    sequence_instance instance;
    std::optional<message_request> pending;
};

/// An instance with WAITING messages: how many, and since when the oldest waits.
struct waiting_instance {
    sequence_instance instance;
    timestamp oldest_waiting_since{};
    std::size_t waiting = 0;
};

template <class S>
concept view_store = store_policy<S> && requires(S& s, const std::string& text, timestamp now, double share, std::size_t limit,
                                                 const scan_position& after, message_id message, instance_id instance,
                                                 const claim_key& key, const message_page& page) {
    /// Instances per sequence and state, and messages per qualified type and state, sorted.
    { s.instance_counts() } -> std::same_as<std::vector<instance_count>>;
    { s.message_counts() } -> std::same_as<std::vector<message_count>>;
    /// Up to `limit` OPEN instances past retain_until at `now`, oldest retention first.
    { s.expired_instances(now, limit) } -> std::same_as<std::vector<sequence_instance>>;
    /// The same after `after` (retain_until, id), for the next page: pass the last row's.
    { s.expired_instances(now, limit, after) } -> std::same_as<std::vector<sequence_instance>>;
    /// Up to `limit` OPEN instances that used `share` (0..1) of their retention but not all of
    /// it, oldest retention first; paged as expired_instances.
    { s.expiring_instances(now, share, limit) } -> std::same_as<std::vector<sequence_instance>>;
    { s.expiring_instances(now, share, limit, after) } -> std::same_as<std::vector<sequence_instance>>;
    /// Up to `limit` instances (any state) with WAITING messages, the longest waiting first.
    { s.waiting_longest(limit) } -> std::same_as<std::vector<waiting_instance>>;
    /// Per sequence with OPEN instances, sorted: how many are expiring and expired at `now`.
    { s.retention_counts(now, share) } -> std::same_as<std::vector<retention_count>>;
    /// The instance (sequence, context id) with the page of its messages, if it exists: at most
    /// `page.limit` messages, so that a view's size does not grow with the instance. Without a
    /// page, the first default_message_page.
    { s.view_instance(text, text, page) } -> std::same_as<std::optional<instance_view>>;
    { s.view_instance(instance, page) } -> std::same_as<std::optional<instance_view>>;
    { s.view_instance(text, text) } -> std::same_as<std::optional<instance_view>>;
    { s.view_instance(instance) } -> std::same_as<std::optional<instance_view>>;
    /// One message by id, or the newest row of a key (qualified type, idempotence id).
    { s.find_message(message) } -> std::same_as<std::optional<message_view>>;
    { s.find_message(key) } -> std::same_as<std::optional<message_view>>;
};

/// The position after `row` in the retention order of expired_instances and expiring_instances.
inline scan_position position_after(const sequence_instance& row) noexcept { return {row.retain_until, row.id}; }

/// request_message_action on the newest row of `key`. Not atomic with the lookup: a request
/// finds the state the row has when it is written.
template <class S>
    requires view_store<S> && action_store<S>
request_outcome request_message_action(S& store, const claim_key& key, message_action action, timestamp now) {
    const auto found = store.find_message(key);
    return found ? store.request_message_action(found->message.id, action, now) : request_outcome::not_found;
}

}  // namespace seqinbox
