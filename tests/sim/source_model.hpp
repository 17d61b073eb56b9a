#pragma once
// The Kafka source as random steps, on the real offset tracker (adapters/kafka/src/offset_tracker):
// a few partitions with a fixed log each, a consumer group of 1-2 members with 2-4 threads each.
// Threads poll, decide, give back (the seek follows as a step of its own, as in
// source::redeliver, so other threads may poll in between); commits are asynchronous and may
// fail; partitions are revoked (the revocation commit, perhaps failing, then the next member
// starts at the group's committed offset) and members crash and restart from it. What the model
// adds to the tracker is what librdkafka and the broker do: fetch positions, seeks, committed
// offsets, generations. Checked after every step: the group's committed offset of a partition
// never passes a record that was never decided; at the end (nothing applies any more), every
// record was decided at least once and the committed offsets are at the ends of the logs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "offset_tracker.hpp"
#include "random.hpp"
#include "violation.hpp"

namespace seqinbox::sim::source {

using kafka::detail::commit_position;
using kafka::detail::offset_tracker;
using kafka::detail::partition_id;

/// A test-only change of the model's source code, to show that the checks catch it.
enum class defect {
    none,
    seek_to_own_record,     ///< redeliver seeks to the record it gave back, not to seek_target() (the last seek wins)
    commit_fetch_position,  ///< commits the fetch positions, as enable.auto.commit would, not the tracker's
};

inline defect defect_named(std::string_view name) {
    if (name == "source_seek_to_own_record") return defect::seek_to_own_record;
    if (name == "source_commit_fetch_position") return defect::commit_fetch_position;
    throw std::invalid_argument("unknown planted defect '" + std::string(name) +
                                "' (known: source_seek_to_own_record, source_commit_fetch_position)");
}

/// What a seed draws before the first step; its own random stream, independent of the engine's.
struct setup {
    std::uint64_t seed = 0;
    std::vector<std::int64_t> log_ends;  ///< per partition: records 0..end-1
    std::vector<std::size_t> threads;    ///< per member
    unsigned fault_percent = 100;
};

/// The setup's stream and the scheduler's: independent of the engine's draws and of each other.
inline random setup_random(std::uint64_t seed) { return random(seed ^ 0x50'c4ce'0ff5'e700ULL); }
inline random scheduler_random(std::uint64_t seed) { return random(seed ^ 0x50'c4ce'5c4e'd000ULL); }

inline setup make_setup(std::uint64_t seed) {
    random rng = setup_random(seed);
    setup s;
    s.seed = seed;
    s.log_ends.resize(rng.between(2, 4));
    for (auto& end : s.log_ends) end = static_cast<std::int64_t>(rng.between(3, 8));
    s.threads.resize(rng.between(1, 2));
    for (auto& t : s.threads) t = rng.between(2, 4);
    static constexpr unsigned fault_levels[] = {50, 100, 200};
    s.fault_percent = fault_levels[rng.below(3)];
    return s;
}

enum class action {
    poll,                ///< thread `actor` takes the record at the fetch position of `partition`
    decide,              ///< thread `actor` makes its record's decision durable and acknowledges it
    give_back,           ///< thread `actor` hands its record back (redeliver, first half)
    seek,                ///< thread `actor` seeks (redeliver, second half, under the poll lock)
    commit,              ///< member `actor` sends an asynchronous commit of what the tracker gives
    commit_succeeds,     ///< member `actor`'s oldest commit in flight lands (unless fenced)
    commit_fails,        ///< member `actor`'s oldest commit in flight fails
    revoke,              ///< `partition` moves to the next member: revocation commit, then assignment
    revoke_uncommitted,  ///< the same, with a failing revocation commit
    restart,             ///< member `actor` crashes and starts again from the committed offsets
};

struct action_info {
    std::string_view name;
    unsigned weight;
    bool fault;  ///< scaled by the setup's fault level
};

inline const action_info& info(action a) {
    static constexpr action_info table[] = {
        {"poll", 40, false},         {"decide", 30, false},         {"give_back", 6, true},       {"seek", 30, false},
        {"commit", 8, false},        {"commit_succeeds", 12, false}, {"commit_fails", 3, true},   {"revoke", 3, true},
        {"revoke_uncommitted", 1, true}, {"restart", 1, true},
    };
    return table[static_cast<std::size_t>(a)];
}
inline constexpr action all_actions[] = {action::poll,           action::decide,          action::give_back, action::seek,
                                         action::commit,         action::commit_succeeds, action::commit_fails,
                                         action::revoke,         action::revoke_uncommitted, action::restart};

struct step {
    action what;
    std::size_t actor = 0;      ///< a thread (numbered across members) or a member
    std::size_t partition = 0;  ///< for poll and the revocations
    friend bool operator==(const step&, const step&) = default;
};

/// Per run, so that every run ends.
struct fault_limits {
    std::size_t revocations = 4;
    std::size_t restarts = 2;
};

struct record {
    std::size_t partition = 0;
    std::int64_t offset = 0;
};

class model {
public:
    model(const setup& s, defect planted, violation_log& log) : setup_(s), planted_(planted), log_(log) {
        decided_.resize(s.log_ends.size());
        for (std::size_t p = 0; p < s.log_ends.size(); ++p) decided_[p].assign(static_cast<std::size_t>(s.log_ends[p]), false);
        committed_.assign(s.log_ends.size(), 0);  // a new group starts at the earliest offset
        checked_ = committed_;
        owner_.resize(s.log_ends.size());
        for (std::size_t m = 0; m < s.threads.size(); ++m) {
            members_.emplace_back();
            for (std::size_t t = 0; t < s.threads[m]; ++t) threads_.push_back({m, std::nullopt, false});
        }
        for (std::size_t p = 0; p < owner_.size(); ++p) assign(p, p % members_.size());
    }

    std::size_t threads() const noexcept { return threads_.size(); }
    std::size_t members() const noexcept { return members_.size(); }
    std::size_t partitions() const noexcept { return owner_.size(); }

    /// Every step that applies now, in a fixed order.
    std::vector<step> candidates(action a) const {
        std::vector<step> out;
        const std::size_t actors = acts_as_thread(a) ? threads() : acts_on_partition(a) ? 1 : members();
        const std::size_t targets = a == action::poll || acts_on_partition(a) ? partitions() : 1;
        for (std::size_t actor = 0; actor < actors; ++actor)
            for (std::size_t p = 0; p < targets; ++p)
                if (step s{a, actor, p}; allows(s)) out.push_back(s);
        return out;
    }

    bool allows(const step& s) const {
        if (acts_as_thread(s.what) && s.actor >= threads()) return false;
        if (!acts_as_thread(s.what) && !acts_on_partition(s.what) && s.actor >= members()) return false;
        if ((s.what == action::poll || acts_on_partition(s.what)) && s.partition >= partitions()) return false;
        switch (s.what) {
        case action::poll: return idle(threads_[s.actor]) && fetchable(threads_[s.actor].member, s.partition);
        case action::decide:
        case action::give_back: return threads_[s.actor].held && !threads_[s.actor].seeking;
        case action::seek: return threads_[s.actor].seeking;
        case action::commit: return members_[s.actor].commit_due;
        case action::commit_succeeds:
        case action::commit_fails: return !members_[s.actor].in_flight_commits.empty();
        case action::revoke:
        case action::revoke_uncommitted: return used_.revocations < limits_.revocations;
        case action::restart: return used_.restarts < limits_.restarts;
        }
        return false;
    }

    /// Applies an allowed step; returns what it did, for the trace.
    std::string apply(const step& s) {
        switch (s.what) {
        case action::poll: return poll(s.actor, s.partition);
        case action::decide: return decide(s.actor);
        case action::give_back: return give_back(s.actor);
        case action::seek: return seek(s.actor);
        case action::commit: return commit(s.actor);
        case action::commit_succeeds: return commit_lands(s.actor);
        case action::commit_fails: return commit_fails(s.actor);
        case action::revoke: return revoke(s.partition, true);
        case action::revoke_uncommitted: return revoke(s.partition, false);
        case action::restart: return restart(s.actor);
        }
        return {};
    }

    /// Nothing applies any more: every member commits what its tracker has, synchronously (as
    /// close() does), then every record must have been decided and every offset be at the end.
    std::string finish() {
        std::string text = "final commit:";
        for (std::size_t m = 0; m < members(); ++m)
            text += (m == 0 ? " m" : ", m") + std::to_string(m) + land(members_[m].tracker.take_commits(0, true));
        check_commits();
        for (std::size_t p = 0; p < partitions(); ++p) {
            for (std::size_t offset = 0; offset < decided_[p].size(); ++offset)
                if (!decided_[p][offset])
                    log_.add("source_never_decided", name(p, static_cast<std::int64_t>(offset)) + " was never decided (" + state_text() + ")");
            if (committed_[p] != setup_.log_ends[p])
                log_.add("source_commit_short_of_end", "committed p" + std::to_string(p) + "=" + std::to_string(committed_[p]) +
                                                           " at the end of a log of " + std::to_string(setup_.log_ends[p]));
        }
        return text;
    }

    /// The group's committed offset of each partition passes no record that was never decided
    /// (checked when it changed: a violation is reported once).
    void check_commits() {
        for (std::size_t p = 0; p < partitions(); ++p) {
            if (checked_[p] == committed_[p]) continue;
            checked_[p] = committed_[p];
            for (std::int64_t offset = 0; offset < committed_[p]; ++offset)
                if (!decided_[p][static_cast<std::size_t>(offset)]) {
                    log_.add("source_commit_past_undecided", "committed p" + std::to_string(p) + "=" + std::to_string(committed_[p]) +
                                                                 " passes " + name(p, offset) + ", never decided");
                    break;
                }
        }
    }

    const std::map<std::string, std::uint64_t>& counts() const noexcept { return counts_; }

private:
    struct thread_state {
        std::size_t member;
        std::optional<record> held;
        bool seeking = false;  ///< gave `held` back, its seek is still to come
    };
    struct commit_in_flight {
        std::vector<commit_position> positions;
        std::uint64_t generation;
    };
    struct member_state {
        offset_tracker tracker;
        std::map<std::size_t, std::int64_t> fetch;  ///< assigned partitions: next offset to fetch
        std::deque<commit_in_flight> in_flight_commits;
        bool commit_due = false;  ///< decided or failed since its last commit
    };

    static bool acts_as_thread(action a) { return a == action::poll || a == action::decide || a == action::give_back || a == action::seek; }
    static bool acts_on_partition(action a) { return a == action::revoke || a == action::revoke_uncommitted; }
    static bool idle(const thread_state& t) { return !t.held && !t.seeking; }
    bool fetchable(std::size_t member, std::size_t p) const {
        const auto& fetch = members_[member].fetch;
        const auto at = fetch.find(p);
        return at != fetch.end() && at->second < setup_.log_ends[p];
    }
    static partition_id id(std::size_t p) { return {0, "in", static_cast<std::int32_t>(p)}; }
    static auto only(std::size_t p) {
        return [p](const partition_id& where) { return where == id(p); };
    }
    static std::string name(std::size_t p, std::int64_t offset) { return "p" + std::to_string(p) + "@" + std::to_string(offset); }
    std::string thread_name(std::size_t t) const {
        std::size_t first = 0;
        while (threads_[first].member != threads_[t].member) ++first;
        return "m" + std::to_string(threads_[t].member) + ".t" + std::to_string(t - first);
    }

    std::string poll(std::size_t t, std::size_t p) {
        auto& m = members_[threads_[t].member];
        const std::int64_t offset = m.fetch[p]++;
        m.tracker.polled(id(p), offset);
        threads_[t].held = record{p, offset};
        ++counts_["source_polls"];
        return thread_name(t) + " " + name(p, offset);
    }

    std::string decide(std::size_t t) {
        const record r = *threads_[t].held;
        decided_[r.partition][static_cast<std::size_t>(r.offset)] = true;
        auto& m = members_[threads_[t].member];
        m.tracker.decided(id(r.partition), r.offset);
        m.commit_due = true;
        threads_[t].held.reset();
        ++counts_["source_decisions"];
        return thread_name(t) + " " + name(r.partition, r.offset);
    }

    std::string give_back(std::size_t t) {
        const record r = *threads_[t].held;
        members_[threads_[t].member].tracker.given_back(id(r.partition), r.offset);
        threads_[t].seeking = true;
        ++counts_["source_give_backs"];
        return thread_name(t) + " " + name(r.partition, r.offset) + " -> its seek is pending";
    }

    std::string seek(std::size_t t) {
        const record r = *threads_[t].held;
        auto& m = members_[threads_[t].member];
        threads_[t].held.reset();
        threads_[t].seeking = false;
        std::optional<std::int64_t> target = m.tracker.seek_target(id(r.partition));
        if (planted_ == defect::seek_to_own_record) target = r.offset;
        const std::string text = thread_name(t) + " for " + name(r.partition, r.offset);
        if (!target) return text + ": nothing to seek to";
        const auto fetch = m.fetch.find(r.partition);
        if (fetch == m.fetch.end()) return text + ": not assigned any more, the seek fails";
        fetch->second = *target;
        ++counts_["source_seeks"];
        return text + " -> fetch " + name(r.partition, *target);
    }

    std::string commit(std::size_t member) {
        auto& m = members_[member];
        m.commit_due = false;
        auto positions = due(m);
        if (positions.empty()) return "m" + std::to_string(member) + ": nothing to commit";
        const std::string text = "m" + std::to_string(member) + " sends" + positions_text(positions);
        m.in_flight_commits.push_back({std::move(positions), generation_});
        ++counts_["source_commits"];
        return text;
    }

    std::vector<commit_position> due(member_state& m) const {
        if (planted_ != defect::commit_fetch_position) return m.tracker.take_commits(0);
        std::vector<commit_position> positions;
        for (const auto& [p, next] : m.fetch) positions.push_back({id(p), next});
        return positions;
    }

    /// The group coordinator rejects a commit of an older generation (a rebalance or restart since).
    std::string commit_lands(std::size_t member) {
        auto& m = members_[member];
        const commit_in_flight c = std::move(m.in_flight_commits.front());
        m.in_flight_commits.pop_front();
        if (c.generation != generation_) return "m" + std::to_string(member) + ": fenced, " + failed(m, c.positions);
        return "m" + std::to_string(member) + ":" + land(c.positions);
    }

    std::string commit_fails(std::size_t member) {
        auto& m = members_[member];
        const commit_in_flight c = std::move(m.in_flight_commits.front());
        m.in_flight_commits.pop_front();
        return "m" + std::to_string(member) + ": " + failed(m, c.positions);
    }

    std::string failed(member_state& m, const std::vector<commit_position>& positions) {
        for (const auto& p : positions) m.tracker.commit_failed(p);
        m.commit_due = true;
        ++counts_["source_commit_failures"];
        return "failed" + positions_text(positions);
    }

    std::string land(const std::vector<commit_position>& positions) {
        for (const auto& p : positions) committed_[static_cast<std::size_t>(p.where.partition)] = p.offset;
        return " committed" + positions_text(positions);
    }

    /// finish_revoked on the owner (records still in flight stay with their threads: the wait
    /// timed out), then note_assigned on the next member, which fetches from the committed offset.
    std::string revoke(std::size_t p, bool commit_lands) {
        ++used_.revocations;
        ++counts_["source_rebalances"];
        const std::size_t from = owner_[p];
        auto& m = members_[from];
        const std::size_t in_flight = m.tracker.in_flight(0, only(p));
        if (in_flight > 0) ++counts_["source_revoked_in_flight"];
        const auto due = m.tracker.take_commits(0, only(p), true);
        std::string text = "p" + std::to_string(p) + " of m" + std::to_string(from) + " (" + std::to_string(in_flight) + " in flight):";
        text += commit_lands ? land(due) : " commit fails" + positions_text(due);
        m.tracker.forget(0, only(p));
        m.fetch.erase(p);
        ++generation_;
        const std::size_t to = (from + 1) % members();
        assign(p, to);
        return text + ", to m" + std::to_string(to) + " at " + std::to_string(committed_[p]);
    }

    void assign(std::size_t p, std::size_t member) {
        owner_[p] = member;
        members_[member].tracker.forget(0, only(p));
        members_[member].fetch[p] = committed_[p];
    }

    /// The member's threads die with their records; it starts afresh from the committed offsets.
    std::string restart(std::size_t member) {
        ++used_.restarts;
        ++counts_["source_restarts"];
        ++generation_;
        std::size_t lost = 0;
        for (auto& t : threads_)
            if (t.member == member) {
                lost += t.held ? 1 : 0;
                t = {member, std::nullopt, false};
            }
        auto& m = members_[member];
        m = member_state{};
        for (std::size_t p = 0; p < partitions(); ++p)
            if (owner_[p] == member) m.fetch[p] = committed_[p];
        return "m" + std::to_string(member) + " (" + std::to_string(lost) + " records held)";
    }

    static std::string positions_text(const std::vector<commit_position>& positions) {
        std::string text;
        for (const auto& p : positions) text += " p" + std::to_string(p.where.partition) + "=" + std::to_string(p.offset);
        return text.empty() ? " nothing" : text;
    }

    /// Where things stand, for a violation's text.
    std::string state_text() const {
        std::string text = "committed";
        for (std::size_t p = 0; p < partitions(); ++p) text += " p" + std::to_string(p) + "=" + std::to_string(committed_[p]);
        for (std::size_t m = 0; m < members(); ++m)
            for (const auto& [p, next] : members_[m].fetch)
                text += ", m" + std::to_string(m) + " fetches p" + std::to_string(p) + "@" + std::to_string(next);
        return text;
    }

    const setup& setup_;
    defect planted_;
    violation_log& log_;
    std::vector<std::vector<bool>> decided_;  ///< per partition and offset: decided at least once
    std::vector<std::int64_t> committed_;     ///< the group's committed offset per partition
    std::vector<std::int64_t> checked_;       ///< per partition: the committed offset last checked
    std::vector<std::size_t> owner_;          ///< per partition: the member it is assigned to
    std::vector<member_state> members_;
    std::vector<thread_state> threads_;
    std::uint64_t generation_ = 0;            ///< the group's, raised by every rebalance and restart
    fault_limits limits_;
    fault_limits used_{0, 0};
    std::map<std::string, std::uint64_t> counts_;
};

}  // namespace seqinbox::sim::source
