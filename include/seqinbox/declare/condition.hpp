#pragma once
// Release conditions: when a sequenced message may be handed to its listener.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqinbox {

/// An immutable tree of `predecessor`, `all_of` (and) and `any_of` (or) nodes; the empty
/// condition releases immediately. Cheap to copy (shared structure).
class condition {
public:
    enum class kind { always, predecessor, all_of, any_of };

    condition() = default;  // always satisfied

    static condition after(std::string qualified_type) {
        condition c;
        c.kind_ = kind::predecessor;
        c.predecessor_ = std::move(qualified_type);
        return c;
    }
    static condition all_of(std::vector<condition> children) { return group(kind::all_of, std::move(children)); }
    static condition any_of(std::vector<condition> children) { return group(kind::any_of, std::move(children)); }

    kind node_kind() const noexcept { return kind_; }
    bool is_always() const noexcept { return kind_ == kind::always; }
    /// The qualified type a `predecessor` node names (empty for other nodes).
    const std::string& predecessor() const noexcept { return predecessor_; }
    const std::vector<condition>& children() const noexcept {
        static const std::vector<condition> none;
        return children_ ? *children_ : none;
    }

    /// Whether the condition holds when `is_processed(qualified_type)` tells which types are PROCESSED.
    template <class IsProcessed>
    bool satisfied(IsProcessed&& is_processed) const {
        switch (kind_) {
        case kind::always: return true;
        case kind::predecessor: return is_processed(predecessor_);
        case kind::all_of:
            for (const auto& c : children())
                if (!c.satisfied(is_processed)) return false;
            return true;
        case kind::any_of:
            for (const auto& c : children())
                if (c.satisfied(is_processed)) return true;
            return false;
        }
        return false;
    }

    /// Calls `visit(name)` for every predecessor named anywhere in the tree.
    template <class Visit>
    void for_each_predecessor(Visit&& visit) const {
        if (kind_ == kind::predecessor) visit(predecessor_);
        for (const auto& c : children()) c.for_each_predecessor(visit);
    }

private:
    static condition group(kind k, std::vector<condition> children) {
        condition c;
        c.kind_ = k;
        c.children_ = std::make_shared<const std::vector<condition>>(std::move(children));
        return c;
    }

    kind kind_ = kind::always;
    std::string predecessor_;
    std::shared_ptr<const std::vector<condition>> children_;
};

/// `all_of`, `any_of`, `predecessor` or `always`: a node's kind as messages about it name it.
std::string_view to_string(condition::kind k) noexcept;

/// How describe() writes a condition.
enum class condition_notation {
    calls,  ///< `all_of(after A, any_of(after B, after C))`, `always`: validation messages
    words,  ///< `A and (B or C)`, `nothing`: prose, as the demo's trace reads
};

/// A condition as text, in one of the notations above.
std::string describe(const condition& c, condition_notation notation = condition_notation::calls);

inline condition after(std::string qualified_type) { return condition::after(std::move(qualified_type)); }
inline condition all_of(std::vector<condition> children) { return condition::all_of(std::move(children)); }
inline condition any_of(std::vector<condition> children) { return condition::any_of(std::move(children)); }

}  // namespace seqinbox
