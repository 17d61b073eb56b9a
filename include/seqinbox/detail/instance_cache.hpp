#pragma once
// Private to the stores (PostgreSQL, MariaDB): the sequence instances one store created or read, so that a
// delivery to a context it has seen skips the create-or-get round trip. An entry goes stale when
// its instance is removed (by this process's housekeeping, which forgets it, or by another
// process): a claim on the removed id then fails its foreign key, and the store forgets the entry.
// An id the server lost in a crash, a failover or a restore may name another context's instance
// later: the engine verifies the instance it locks, and a connection given back broken clears all.
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

/// At most `capacity` instances, the least recently used dropped first; 0 keeps none.
/// Thread-safe.
class instance_cache {
public:
    explicit instance_cache(std::size_t capacity) : capacity_(capacity) {}

    std::optional<sequence_instance> find(const std::string& sequence, const std::string& context_id) {
        const std::lock_guard lock(mutex_);
        const auto it = by_key_.find(key_of(sequence, context_id));
        if (it == by_key_.end()) return std::nullopt;
        used_.splice(used_.begin(), used_, it->second);
        return *it->second;
    }

    void remember(const sequence_instance& instance) {
        if (capacity_ == 0) return;
        const std::lock_guard lock(mutex_);
        std::string key = key_of(instance);
        forget_locked(instance.id);
        if (const auto it = by_key_.find(key); it != by_key_.end()) forget_locked(it->second->id);
        if (used_.size() == capacity_) forget_locked(used_.back().id);
        used_.push_front(instance);
        by_key_.emplace(std::move(key), used_.begin());
        by_id_.emplace(instance.id, used_.begin());
    }

    void forget(instance_id id) {
        const std::lock_guard lock(mutex_);
        forget_locked(id);
    }

    void clear() {
        const std::lock_guard lock(mutex_);
        by_key_.clear();
        by_id_.clear();
        used_.clear();
    }

private:
    using entries = std::list<sequence_instance>;

    // Length-prefixed, so that no two (sequence, context) pairs share a key.
    static std::string key_of(const std::string& sequence, const std::string& context_id) {
        return std::to_string(sequence.size()) + ':' + sequence + context_id;
    }
    static std::string key_of(const sequence_instance& i) { return key_of(i.sequence, i.context_id); }

    void forget_locked(instance_id id) {
        const auto it = by_id_.find(id);
        if (it == by_id_.end()) return;
        by_key_.erase(key_of(*it->second));
        used_.erase(it->second);
        by_id_.erase(it);
    }

    const std::size_t capacity_;
    std::mutex mutex_;
    entries used_;  ///< most recently used first
    std::unordered_map<std::string, entries::iterator> by_key_;
    std::unordered_map<instance_id, entries::iterator> by_id_;
};

}  // namespace seqinbox::detail
