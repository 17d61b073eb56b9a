#pragma once
// Runs the seqinbox program (SEQINBOX_CLI, defined by the build) and collects what it printed.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <boost/test/unit_test.hpp>

#include "support/shell_command.hpp"

namespace seqinbox::test {

struct cli_outcome {
    int exit_code;
    std::string output;  // stdout and stderr
};

/// `seqinbox <arguments>` through the shell (arguments are shell words, quote them).
inline cli_outcome run_cli(const std::string& arguments) {
    const std::string command = shell_quote(SEQINBOX_CLI) + " " + arguments + " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    BOOST_REQUIRE(pipe != nullptr);
    std::string output;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    const int status = ::pclose(pipe);
    BOOST_REQUIRE(WIFEXITED(status));
    return {WEXITSTATUS(status), output};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace seqinbox::test
