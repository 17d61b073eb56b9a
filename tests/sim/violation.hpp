#pragma once
// What the invariant checks found, with the step after which each was seen.
#include <cstddef>
#include <string>
#include <vector>

namespace seqinbox::sim {

struct violation {
    std::string kind;  ///< stable name, e.g. "listener_overlap_key"; shrinking keeps the kind
    std::string text;
    std::size_t step;  ///< index of the step after which it was seen
};

class violation_log {
public:
    void at_step(std::size_t step) noexcept { step_ = step; }
    void add(std::string kind, std::string text) { found_.push_back({std::move(kind), std::move(text), step_}); }
    bool empty() const noexcept { return found_.empty(); }
    const std::vector<violation>& all() const noexcept { return found_; }

private:
    std::size_t step_ = 0;
    std::vector<violation> found_;
};

}  // namespace seqinbox::sim
