#pragma once
// Private to seqinbox::kafka: which offset each partition may commit. A partition's records are
// in flight from poll until decided (acknowledged) or given back (redelivered); the commit
// position is the offset after the longest decided prefix of what was polled, so a record in
// flight or given back holds back everything behind it. A given-back record stays in the
// prefix as a floor until it is polled again and decided: the consumer seeks back to the lowest
// such record (seek_target), whichever thread gave back which, so no two seeks of one partition
// can skip one. Not thread-safe (the source locks).
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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
    /// No decision was reached for `offset`: it must be polled again (seek to seek_target()),
    /// and the commit position stays at or below it until then.
    void given_back(const partition_id& where, std::int64_t offset);
    /// Where the consumer must seek so that every given-back record of `where` is polled again:
    /// the lowest one not polled again yet; nothing when none is pending.
    std::optional<std::int64_t> seek_target(const partition_id& where) const;
    /// Whether `offset` was polled and is neither decided nor forgotten since.
    bool undecided(const partition_id& where, std::int64_t offset) const;

    /// Positions that moved since they were last taken, of the assigned partitions of consumer
    /// `cluster` that `owned` accepts; taking them counts them as committed (commit_failed()
    /// undoes that). `all`: every known position, also those taken by commits whose outcome is
    /// not known yet.
    template <class Predicate>
    std::vector<commit_position> take_commits(std::size_t cluster, Predicate owned, bool all = false) {
        std::vector<commit_position> result;
        for (auto& [where, state] : partitions_)
            if (where.cluster == cluster && owned(where) && state.position >= 0 && (all || state.position > state.committed)) {
                result.push_back({where, state.position});
                state.committed = state.position;
            }
        return result;
    }
    std::vector<commit_position> take_commits(std::size_t cluster, bool all = false) {
        return take_commits(cluster, [](const partition_id&) { return true; }, all);
    }
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
    /// Forgets the partitions of `cluster` that `owned` accepts (revoked): when one comes back,
    /// it starts afresh from the group's committed offset, whatever was decided here before.
    template <class Predicate>
    void forget(std::size_t cluster, Predicate owned) {
        std::erase_if(partitions_, [&](const auto& entry) { return entry.first.cluster == cluster && owned(entry.first); });
    }

    std::size_t in_flight_total() const;

private:
    enum class record_state { in_flight, decided, given_back };
    struct partition_state {
        std::map<std::int64_t, record_state> polled;  ///< from the oldest record not decided
        std::size_t in_flight = 0;
        std::int64_t position = -1;   ///< next offset to commit; -1 while nothing was decided
        std::int64_t committed = -1;  ///< the position last taken for a commit
    };
    void advance(partition_state& state);
    std::map<partition_id, partition_state> partitions_;
};

}  // namespace seqinbox::kafka::detail
