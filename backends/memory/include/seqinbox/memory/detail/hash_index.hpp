#pragma once
// An open-addressing multimap from a hash to a nonzero id: the in-memory store's indexes. Growing
// moves 16-byte entries in one sequential pass; std::unordered_map relinks every node instead, a
// cache miss each once its nodes outgrow the cache, which made the cost per delivery climb with
// the number of contexts. Callers compare the rows an id names: hashes may collide.
// Internal; not thread-safe (the store's mutex guards it).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqinbox::memory::detail {

class hash_index {
public:
    void insert(std::size_t hash, std::uint64_t id) {
        if ((used_ + 1) * 8 > slots_.size() * 5) grow();
        for (std::size_t i = home(hash);; i = next(i)) {
            entry& e = slots_[i];
            if (e.id == vacant || e.id == erased) {
                if (e.id == vacant) ++used_;
                e = {hash, id};
                ++live_;
                return;
            }
        }
    }

    /// Removes the entry (hash, id); whether there was one.
    bool erase(std::size_t hash, std::uint64_t id) {
        if (slots_.empty()) return false;
        for (std::size_t i = home(hash); slots_[i].id != vacant; i = next(i))
            if (slots_[i].hash == hash && slots_[i].id == id) {
                slots_[i].id = erased;
                --live_;
                return true;
            }
        return false;
    }

    /// The first id with `hash` that `match` accepts, or 0.
    template <class Match>
    std::uint64_t find(std::size_t hash, Match match) const {
        if (slots_.empty()) return 0;
        for (std::size_t i = home(hash); slots_[i].id != vacant; i = next(i))
            if (slots_[i].hash == hash && slots_[i].id != erased && match(slots_[i].id)) return slots_[i].id;
        return 0;
    }

    std::size_t size() const noexcept { return live_; }

private:
    struct entry {
        std::size_t hash = 0;
        std::uint64_t id = vacant;
    };
    static constexpr std::uint64_t vacant = 0;
    static constexpr std::uint64_t erased = ~std::uint64_t{0};

    std::size_t home(std::size_t hash) const noexcept {
        return (hash * 0x9e3779b97f4a7c15ULL >> 7) & (slots_.size() - 1);  // spreads low-entropy hashes
    }
    std::size_t next(std::size_t i) const noexcept { return (i + 1) & (slots_.size() - 1); }

    /// Doubles when live entries fill a quarter of the slots; otherwise rebuilds at the same size
    /// to drop erased entries.
    void grow() {
        std::size_t capacity = slots_.empty() ? 16 : slots_.size();
        if (live_ * 4 >= capacity) capacity *= 2;
        std::vector<entry> old(capacity);
        old.swap(slots_);
        used_ = live_ = 0;
        for (const entry& e : old)
            if (e.id != vacant && e.id != erased) insert(e.hash, e.id);
    }

    std::vector<entry> slots_;  // a power of two in size, or empty
    std::size_t used_ = 0;      // live and erased entries: what ends a probe
    std::size_t live_ = 0;
};

}  // namespace seqinbox::memory::detail
