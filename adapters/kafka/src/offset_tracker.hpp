#pragma once
// Private to seqinbox::kafka: which offset each partition may commit. A partition's records are
// in flight from poll until decided (acknowledged) or given back (redelivered); the commit
// position is the offset after the longest decided prefix of what was polled, so a gap left by a
// record still in flight holds back everything behind it. Not thread-safe (the source locks).
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace seqinbox::kafka::detail {

struct partition_id {
    std::size_t cluster = 0;  ///< index of the consumer
    std::string topic;
    std::int32_t partition = 0;
    friend auto operator<=>(const partition_id&, const partition_id&) = default;
};

struct commit_position {
    partition_id where;
    std::int64_t offset = 0;  ///< the next offset to consume, as Kafka commits it
};

class offset_tracker {
public:
    void polled(const partition_id& where, std::int64_t offset);
    /// Decided records are committable once every earlier polled record of the partition is.
    void decided(const partition_id& where, std::int64_t offset);
    /// `offset` and everything polled after it in its partition will be polled again.
    void given_back(const partition_id& where, std::int64_t offset);

    /// Positions of assigned partitions that moved since they were last taken, for cluster `cluster`; taking them
    /// counts them as committed (commit_failed() undoes that). `all`: every known position,
    /// also those taken by commits whose outcome is not known yet.
    std::vector<commit_position> take_commits(std::size_t cluster, bool all = false);
    void commit_failed(const commit_position& position);

    /// Records polled but not yet decided or given back, in the partitions of `cluster` that
    /// `owned` accepts.
    template <class Predicate>
    std::size_t in_flight(std::size_t cluster, Predicate owned) const {
        std::size_t count = 0;
        for (const auto& [where, state] : partitions_)
            if (where.cluster == cluster && owned(where)) count += state.in_flight;
        return count;
    }
    /// Forgets the partitions of `cluster` that `owned` accepts (revoked, positions committed).
    template <class Predicate>
    void forget(std::size_t cluster, Predicate owned) {
        std::erase_if(partitions_, [&](const auto& entry) { return entry.first.cluster == cluster && owned(entry.first); });
    }
    /// Keeps only the positions of those partitions (revoked before they could be committed):
    /// they are committed if the partitions come back (a member must not commit partitions it
    /// does not own, which would make it rejoin its group), and records polled again count afresh.
    template <class Predicate>
    void set_aside(std::size_t cluster, Predicate owned) {
        for (auto& [where, state] : partitions_)
            if (where.cluster == cluster && owned(where)) {
                state.polled.clear();
                state.in_flight = 0;
                state.assigned = false;
                state.committed = -1;
            }
    }
    void assigned(const partition_id& where) { partitions_[where].assigned = true; }

    std::size_t in_flight_total() const;

private:
    struct partition_state {
        std::map<std::int64_t, bool> polled;  ///< offset -> decided, from the oldest undecided one
        std::size_t in_flight = 0;
        std::int64_t position = -1;   ///< next offset to commit; -1 while nothing was decided
        std::int64_t committed = -1;  ///< the position last taken for a commit
        bool assigned = true;
    };
    std::map<partition_id, partition_state> partitions_;
};

}  // namespace seqinbox::kafka::detail
