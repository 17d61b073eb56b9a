#pragma once
// Shared by the benchmarks: `name value` output lines, correctness checks that fail the run, and
// timing helpers.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace seqinbox::bench {

using clock_type = std::chrono::steady_clock;

/// A correctness check of the benchmark failed: its figures mean nothing.
struct check_failed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void require(bool ok, const std::string& what) {
    if (!ok) throw check_failed(what);
}

inline void print(std::string_view name, double value) {
    std::printf("%.*s %.6g\n", static_cast<int>(name.size()), name.data(), value);
}
inline void print(std::string_view name, std::size_t value) {
    std::printf("%.*s %zu\n", static_cast<int>(name.size()), name.data(), value);
}

/// The value of option `flag`, a whole number above 0.
inline std::size_t positive_number(std::string_view flag, std::string_view text) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || end != text.data() + text.size() || n == 0)
        throw std::invalid_argument(std::string(flag) + " needs a positive number, not '" + std::string(text) + "'");
    return n;
}

inline double median(std::vector<double> values) {
    std::ranges::sort(values);
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 != 0 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

inline double elapsed_ns(clock_type::time_point from, clock_type::time_point to) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

inline double elapsed_s(clock_type::time_point from, clock_type::time_point to) { return elapsed_ns(from, to) / 1e9; }

/// Runs a benchmark's body and turns its failures into a message and exit status 1.
template <class Body>
int run_guarded(const char* program, Body body) {
    try {
        body();
        return 0;
    } catch (const check_failed& e) {
        std::fprintf(stderr, "%s: check failed: %s\n", program, e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
    }
    return 1;
}

}  // namespace seqinbox::bench
