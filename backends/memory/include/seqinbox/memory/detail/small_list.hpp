#pragma once
// A list of trivially copyable values kept inside its owner while it holds at most N of them, on
// the heap beyond: an instance's few message ids and claim slots are then read from the lines of
// its row the lookup brought into the cache, not from allocations of their own (a cache miss each
// once the store outgrows the cache). Internal; not thread-safe (the store's mutex guards it).
#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace seqinbox::memory::detail {

template <class T, std::size_t N>
class small_list {
    static_assert(std::is_trivially_copyable_v<T>, "small_list holds plain values");

public:
    void push_back(T value) {
        if (heap_.empty() && size_ < N) {
            inline_[size_++] = value;
            return;
        }
        if (heap_.empty()) heap_.assign(inline_.begin(), inline_.begin() + size_);
        heap_.push_back(value);
        ++size_;
    }
    void pop_back() {
        --size_;
        if (!heap_.empty()) heap_.pop_back();
    }

    const T* begin() const noexcept { return heap_.empty() ? inline_.data() : heap_.data(); }
    const T* end() const noexcept { return begin() + size_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }

private:
    std::array<T, N> inline_{};
    std::size_t size_ = 0;
    std::vector<T> heap_;  // every value once there are more than N (heap_.size() == size_)
};

}  // namespace seqinbox::memory::detail
