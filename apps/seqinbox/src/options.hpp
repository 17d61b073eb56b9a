#pragma once
// Command-line parsing shared by the subcommands: `--name value`, `--name=value` and flags.
// A usage_error ends the program with exit code 2; its text names the offending word.
#include <charconv>
#include <cstdlib>
#include <map>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "seqinbox/detail/share_text.hpp"

namespace seqinbox::cli {

/// Exit codes of every subcommand.
enum exit_code : int { exit_ok = 0, exit_check_failed = 1, exit_usage = 2 };

/// The command line is wrong (unknown subcommand or option, missing or malformed value).
class usage_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Walks the arguments of one subcommand. Typical use:
///   for (option_reader r(args, "demo"); r.next();)
///       if (r.flag("--quiet")) ... else if (auto v = r.value("--seed")) ... else r.unknown();
class option_reader {
public:
    option_reader(std::span<const std::string_view> args, std::string_view command) : args_(args), command_(command) {}

    /// Moves to the next argument; false at the end.
    bool next() {
        if (index_ >= args_.size()) return false;
        current_ = args_[index_++];
        return true;
    }

    std::string_view current() const noexcept { return current_; }

    /// True when the current argument is the flag `name`.
    bool flag(std::string_view name) const { return current_ == name; }

    /// The value of option `name` given as `name value` or `name=value`; nothing when the current
    /// argument is another option. Throws usage_error when the value is missing.
    std::optional<std::string_view> value(std::string_view name) {
        if (current_ == name) {
            if (index_ >= args_.size()) throw usage_error(prefix() + "option '" + std::string(name) + "' needs a value");
            return args_[index_++];
        }
        if (current_.size() > name.size() && current_.starts_with(name) && current_[name.size()] == '=')
            return current_.substr(name.size() + 1);
        return std::nullopt;
    }

    /// Parses the value of option `name` as an unsigned integer in [min, max].
    std::uint64_t number(std::string_view name, std::string_view text, std::uint64_t min, std::uint64_t max) const {
        std::uint64_t n = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc{} || end != text.data() + text.size() || n < min || n > max)
            throw usage_error(prefix() + "option '" + std::string(name) + "' expects a whole number from " +
                              std::to_string(min) + " to " + std::to_string(max) + ", not '" + std::string(text) + "'");
        return n;
    }

    /// Parses the value of option `name` as a share: a plain decimal number in (0, 1].
    double share(std::string_view name, std::string_view text) const {
        const auto share = seqinbox::detail::plain_share(text);
        if (!share)
            throw usage_error(prefix() + "option '" + std::string(name) + "' expects a decimal number in (0, 1], not '" + std::string(text) + "'");
        return *share;
    }

    /// Parses the value of option `name` as a duration: a whole number with unit ms, s, m, h or
    /// d (`500ms`, `30s`, `10m`), from 1 ms (or 0 where `zero` allows it) to 30 days.
    enum class zero { refused, allowed };
    std::chrono::milliseconds duration(std::string_view name, std::string_view text, zero zero_is = zero::refused) const {
        using namespace std::chrono;
        static constexpr std::pair<std::string_view, milliseconds> units[] = {
            {"ms", milliseconds(1)}, {"s", seconds(1)}, {"m", minutes(1)}, {"h", hours(1)}, {"d", hours(24)}};
        std::uint64_t n = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
        for (const auto& [suffix, length] : units)
            if (ec == std::errc{} && unit == suffix && (n > 0 || zero_is == zero::allowed) && n <= static_cast<std::uint64_t>(hours(24 * 30) / length))
                return length * static_cast<std::int64_t>(n);
        throw usage_error(prefix() + "option '" + std::string(name) + "' expects a duration such as 500ms, 30s, 10m, 24h or 7d " +
                          "(at most 30d" + (zero_is == zero::allowed ? ", or 0s" : "") + "), not '" + std::string(text) + "'");
    }

    /// Splits the value of option `name` at its first '=' into a non-empty name and a value.
    std::pair<std::string, std::string> assignment(std::string_view name, std::string_view text) const {
        const auto equals = text.find('=');
        if (equals == std::string_view::npos || equals == 0)
            throw usage_error(prefix() + "option '" + std::string(name) + "' expects NAME=VALUE, not '" + std::string(text) + "'");
        return {std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
    }

    /// Throws the usage error for the current argument.
    [[noreturn]] void unknown() const {
        if (current_.starts_with('-')) throw usage_error(prefix() + "unknown option '" + std::string(current_) + "'");
        throw usage_error(prefix() + "unexpected argument '" + std::string(current_) + "'");
    }

    /// "seqinbox COMMAND: ", which begins every usage_error about this command line.
    std::string prefix() const { return "seqinbox " + std::string(command_) + ": "; }

private:

    std::span<const std::string_view> args_;
    std::string_view command_;
    std::string_view current_;
    std::size_t index_ = 0;
};

/// Throws the usage error of `command` for the required `option` when it was not `given`.
inline void require_option(std::string_view command, bool given, std::string_view option) {
    if (!given)
        throw usage_error("seqinbox " + std::string(command) + ": option '" + std::string(option) + "' is required");
}

/// Sets `entry.first` to `entry.second` in `map` (a later option wins over an earlier one).
inline void assign(std::map<std::string, std::string>& map, std::pair<std::string, std::string> entry) {
    map.insert_or_assign(std::move(entry.first), std::move(entry.second));
}

}  // namespace seqinbox::cli
