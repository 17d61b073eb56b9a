#pragma once
// The simulator's only source of randomness. std::mt19937_64 is specified bit for bit by the
// standard; the distributions are not, so the uniform helpers below are our own and a seed gives
// the same run with every standard library.
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace seqinbox::sim {

class random {
public:
    explicit random(std::uint64_t seed) : engine_(seed) {}

    /// Uniform in [0, n); n > 0. Rejection sampling removes the modulo bias.
    std::size_t below(std::size_t n) {
        const std::uint64_t bound = static_cast<std::uint64_t>(n);
        const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
        std::uint64_t x = engine_();
        while (x >= limit) x = engine_();
        return static_cast<std::size_t>(x % bound);
    }
    /// Uniform in [low, high].
    std::size_t between(std::size_t low, std::size_t high) { return low + below(high - low + 1); }
    /// True with probability percent / 100.
    bool chance(unsigned percent) { return below(100) < percent; }

    template <class T>
    const T& pick(const std::vector<T>& items) {
        return items[below(items.size())];
    }
    /// A group drawn by its weight (the first of each pair), then one of its items; groups are
    /// not empty. Nothing when there is no group.
    template <class T>
    std::optional<T> pick_weighted(const std::vector<std::pair<unsigned, std::vector<T>>>& groups) {
        unsigned total = 0;
        for (const auto& group : groups) total += group.first;
        if (groups.empty()) return std::nullopt;
        std::size_t roll = below(total);
        for (const auto& [weight, items] : groups) {
            if (roll < weight) return pick(items);
            roll -= weight;
        }
        return std::nullopt;
    }
    template <class T>
    void shuffle(std::vector<T>& items) {
        for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
    }

private:
    std::mt19937_64 engine_;
};

}  // namespace seqinbox::sim
