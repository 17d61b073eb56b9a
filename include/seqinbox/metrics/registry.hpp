#pragma once
// A metrics registry rendered in the Prometheus text exposition format 0.0.4: counter, gauge and
// histogram families with labels. Thread-safe: updates from many threads and rendering may run
// at once. A family lives as long as its registry, so references to it stay valid.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::metrics {

/// The Content-Type an HTTP endpoint serving registry::render() should send.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// The values of a series' labels, in the order of the family's label names. Views only: it
/// must not outlive the strings it refers to (pass it straight to an update).
class label_values {
public:
    label_values(std::initializer_list<std::string_view> values) : values_(values.begin(), values.size()) {}
    label_values(std::span<const std::string_view> values) : values_(values) {}

    std::span<const std::string_view> view() const noexcept { return values_; }

private:
    std::span<const std::string_view> values_;
};

/// Histogram bounds for durations in seconds, from a millisecond to a minute.
inline std::vector<double> default_duration_buckets() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

/// Histogram bounds for waits in seconds, from a tenth of a second to a week.
inline std::vector<double> default_wait_buckets() {
    return {0.1, 1, 10, 60, 300, 900, 1800, 3600, 7200, 21600, 43200, 86400, 259200, 604800};
}

namespace detail {

/// Orders label value lists; transparent so a lookup by string_views allocates nothing.
struct labels_less {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
        return std::ranges::lexicographical_compare(a, b, [](std::string_view x, std::string_view y) { return x < y; });
    }
};

/// Prometheus parses the shortest round-trip form std::to_chars writes, whatever the locale.
inline void append_number(std::string& out, double value) {
    if (std::isnan(value)) {
        out += "NaN";
    } else if (std::isinf(value)) {
        out += value > 0 ? "+Inf" : "-Inf";
    } else {
        char buffer[32];  // the longest shortest form of a double takes 24
        out.append(buffer, std::to_chars(std::begin(buffer), std::end(buffer), value).ptr);
    }
}

inline void append_number(std::string& out, std::uint64_t value) {
    char buffer[24];
    out.append(buffer, std::to_chars(std::begin(buffer), std::end(buffer), value).ptr);
}

/// HELP text escapes backslash and newline; label values also escape the double quote.
inline void append_escaped(std::string& out, std::string_view text, bool escape_quote) {
    for (char c : text) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '"' && escape_quote)
            out += "\\\"";
        else
            out += c;
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*` for metric names; label names allow no colon.
inline bool valid_name(std::string_view name, bool colon_allowed) {
    auto allowed = [&](char c, bool first) {
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
        return letter || (!first && c >= '0' && c <= '9');
    };
    if (name.empty() || !allowed(name.front(), true)) return false;
    return std::ranges::all_of(name.substr(1), [&](char c) { return allowed(c, false); });
}

[[noreturn]] inline void misuse(const std::string& what) {
    throw error(error_category::misuse, "metrics: " + what);
}

/// `name="value",…` without braces.
inline std::string render_labels(std::span<const std::string> names, std::span<const std::string_view> values) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += ',';
        out += names[i];
        out += "=\"";
        append_escaped(out, values[i], true);
        out += '"';
    }
    return out;
}

/// One sample line: `name{labels} value`.
inline void append_sample(std::string& out, std::string_view name, std::string_view labels, auto value) {
    out += name;
    if (!labels.empty()) {
        out += '{';
        out += labels;
        out += '}';
    }
    out += ' ';
    append_number(out, value);
    out += '\n';
}

/// What every family shares: its definition and its HELP/TYPE header.
class family {
public:
    family(std::string_view name, std::string_view help, std::vector<std::string> label_names)
        : name_(name), help_(seqinbox::detail::utf8_repaired(help)), label_names_(std::move(label_names)) {
        if (!valid_name(name_, true)) misuse("invalid metric name '" + name_ + "'");
        for (const auto& label : label_names_)
            if (!valid_name(label, false) || label.starts_with("__"))
                misuse("invalid label name '" + label + "' for metric '" + name_ + "'");
    }
    family(const family&) = delete;
    family& operator=(const family&) = delete;
    virtual ~family() = default;

    const std::string& name() const noexcept { return name_; }

    /// Appends the family in exposition format; nothing when it has no series yet.
    virtual void render(std::string& out) const = 0;

    /// Whether `other` registers the same family again (same kind, labels and buckets).
    virtual bool same_definition(const family& other) const {
        return typeid(*this) == typeid(other) && label_names_ == other.label_names_;
    }

protected:
    void render_header(std::string& out, std::string_view type) const {
        out += "# HELP ";
        out += name_;
        out += ' ';
        append_escaped(out, help_, false);
        out += "\n# TYPE ";
        out += name_;
        out += ' ';
        out += type;
        out += '\n';
    }

    std::string name_;
    std::string help_;
    std::vector<std::string> label_names_;
};

/// A family of series of type Series, one per distinct list of label values. A family without
/// labels has its one series from the start, so it renders (as zero) before any update.
template <class Series>
class series_family : public family {
public:
    series_family(std::string_view name, std::string_view help, std::vector<std::string> label_names, Series blank)
        : family(name, help, std::move(label_names)), blank_(std::move(blank)) {
        if (label_names_.empty()) update({}, [](Series&) {});
    }

protected:
    struct series {
        std::string rendered_labels;
        Series data;
    };

    /// Runs `change` on the series of `labels` under the family's lock, creating it if new.
    template <class Change>
    void update(label_values labels, Change&& change) {
        const auto values = labels.view();
        if (values.size() != label_names_.size())
            misuse("metric '" + name_ + "' takes " + std::to_string(label_names_.size()) + " label values, got " +
                   std::to_string(values.size()));
        if (!std::ranges::all_of(values, seqinbox::detail::is_utf8)) return update_repaired(values, std::forward<Change>(change));
        std::lock_guard lock(mutex_);
        auto it = series_.find(values);
        if (it == series_.end())
            it = series_.emplace(std::vector<std::string>(values.begin(), values.end()),
                                 series{render_labels(label_names_, values), blank_})
                     .first;
        change(it->second.data);
    }

    /// A byte that is not UTF-8 would make Prometheus reject the whole scrape: such label values
    /// count in the series of their repaired form (U+FFFD for each such byte).
    template <class Change>
    void update_repaired(std::span<const std::string_view> values, Change&& change) {
        std::vector<std::string> repaired;
        for (auto value : values) repaired.push_back(seqinbox::detail::utf8_repaired(value));
        const std::vector<std::string_view> views(repaired.begin(), repaired.end());
        update(label_values(std::span(views)), std::forward<Change>(change));
    }

    /// Header, then `sample(out, series)` for each series in label order, under the lock.
    template <class Sample>
    void render_all(std::string& out, std::string_view type, Sample&& sample) const {
        std::lock_guard lock(mutex_);
        if (series_.empty()) return;
        render_header(out, type);
        for (const auto& [values, s] : series_) sample(out, s);
    }

private:
    Series blank_;
    mutable std::mutex mutex_;
    std::map<std::vector<std::string>, series, labels_less> series_;
};

/// A counter or a gauge: one number per series.
class value_family : public series_family<double> {
public:
    value_family(std::string_view name, std::string_view help, std::vector<std::string> label_names)
        : series_family(name, help, std::move(label_names), 0.0) {}

protected:
    void render_values(std::string& out, std::string_view type) const {
        render_all(out, type, [this](std::string& o, const series& s) { append_sample(o, name_, s.rendered_labels, s.data); });
    }
};

struct histogram_series {
    std::vector<std::uint64_t> bucket_counts;  ///< per bucket, not cumulative; the last is +Inf
    double sum = 0;
    std::uint64_t count = 0;
};

}  // namespace detail

/// Only goes up: `inc` by a non-negative amount.
class counter_family final : public detail::value_family {
public:
    using value_family::value_family;

    void inc(label_values labels, double amount = 1) {
        if (!(amount >= 0)) detail::misuse("counter '" + name_ + "' cannot decrease");
        update(labels, [amount](double& value) { value += amount; });
    }

    void render(std::string& out) const override { render_values(out, "counter"); }
};

/// Goes up and down: `set` or `add` (negative to subtract).
class gauge_family final : public detail::value_family {
public:
    using value_family::value_family;

    void set(label_values labels, double value) {
        update(labels, [value](double& current) { current = value; });
    }
    void add(label_values labels, double amount) {
        update(labels, [amount](double& current) { current += amount; });
    }

    void render(std::string& out) const override { render_values(out, "gauge"); }
};

/// Counts observations into buckets with inclusive upper bounds; +Inf is implicit.
class histogram_family final : public detail::series_family<detail::histogram_series> {
public:
    histogram_family(std::string_view name, std::string_view help, std::vector<std::string> label_names,
                     std::vector<double> bounds)
        : series_family(name, help, checked_labels(name, std::move(label_names)),
                        detail::histogram_series{std::vector<std::uint64_t>(bounds.size() + 1, 0)}),
          bounds_(checked_bounds(name, std::move(bounds))) {
        for (double bound : bounds_) detail::append_number(rendered_bounds_.emplace_back("le=\""), bound);
        for (auto& le : rendered_bounds_) le += '"';
        rendered_bounds_.emplace_back("le=\"+Inf\"");
    }

    void observe(label_values labels, double value) {
        const auto bucket = static_cast<std::size_t>(std::ranges::lower_bound(bounds_, value) - bounds_.begin());
        update(labels, [&](detail::histogram_series& s) {
            ++s.bucket_counts[bucket];
            s.sum += value;
            ++s.count;
        });
    }

    void render(std::string& out) const override {
        render_all(out, "histogram", [this](std::string& o, const series& s) { render_series(o, s); });
    }

    bool same_definition(const detail::family& other) const override {
        return family::same_definition(other) && bounds_ == static_cast<const histogram_family&>(other).bounds_;
    }

private:
    static std::vector<std::string> checked_labels(std::string_view name, std::vector<std::string> labels) {
        if (std::ranges::find(labels, "le") != labels.end())
            detail::misuse("histogram '" + std::string(name) + "' cannot have a label named 'le'");
        return labels;
    }

    static std::vector<double> checked_bounds(std::string_view name, std::vector<double> bounds) {
        const bool finite = std::ranges::all_of(bounds, [](double b) { return std::isfinite(b); });
        const bool increasing = std::ranges::adjacent_find(bounds, std::greater_equal<>{}) == bounds.end();
        if (!finite || !increasing)
            detail::misuse("histogram '" + std::string(name) + "' needs finite, strictly increasing bucket bounds");
        return bounds;
    }

    void render_series(std::string& out, const series& s) const {
        const std::string bucket_name = name_ + "_bucket";
        const std::string separator = s.rendered_labels.empty() ? "" : ",";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < rendered_bounds_.size(); ++i) {
            cumulative += s.data.bucket_counts[i];
            detail::append_sample(out, bucket_name, s.rendered_labels + separator + rendered_bounds_[i], cumulative);
        }
        detail::append_sample(out, name_ + "_sum", s.rendered_labels, s.data.sum);
        detail::append_sample(out, name_ + "_count", s.rendered_labels, s.data.count);
    }

    std::vector<double> bounds_;
    std::vector<std::string> rendered_bounds_;  ///< `le="…"` per bucket, +Inf last
};

/// Owns metric families by name and renders them all. Registering a name again with the same
/// definition returns the existing family, so several users can share one registry; a
/// different definition is a misuse error.
class registry {
public:
    registry() = default;
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    counter_family& counter(std::string_view name, std::string_view help, std::vector<std::string> label_names = {}) {
        return add<counter_family>(name, help, std::move(label_names));
    }
    gauge_family& gauge(std::string_view name, std::string_view help, std::vector<std::string> label_names = {}) {
        return add<gauge_family>(name, help, std::move(label_names));
    }
    histogram_family& histogram(std::string_view name, std::string_view help, std::vector<std::string> label_names = {},
                                std::vector<double> bounds = default_duration_buckets()) {
        return add<histogram_family>(name, help, std::move(label_names), std::move(bounds));
    }

    /// Every family with at least one series, ordered by name, its series ordered by labels.
    std::string render() const {
        std::string out;
        std::lock_guard lock(mutex_);
        for (const auto& [name, f] : families_) f->render(out);
        return out;
    }

private:
    template <class Family, class... Definition>
    Family& add(std::string_view name, Definition&&... definition) {
        auto candidate = std::make_unique<Family>(name, std::forward<Definition>(definition)...);
        std::lock_guard lock(mutex_);
        auto [it, inserted] = families_.try_emplace(std::string(name), std::move(candidate));
        if (!inserted && !it->second->same_definition(*candidate))
            detail::misuse("metric '" + std::string(name) + "' is already registered with another kind, labels or buckets");
        return static_cast<Family&>(*it->second);
    }

    mutable std::mutex mutex_;
    std::map<std::string, std::unique_ptr<detail::family>, std::less<>> families_;
};

}  // namespace seqinbox::metrics
