#pragma once
// The foreground subcommands (`run`, `dev-kafka`) stop on SIGTERM or SIGINT: block both before
// starting any thread, so that every thread inherits the mask and only the waiting one takes them.
#include <pthread.h>
#include <signal.h>

#include <string_view>

namespace seqinbox::cli {

/// Blocks SIGTERM and SIGINT in this thread and every thread it starts afterwards.
inline sigset_t block_stop_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    return signals;
}

/// Waits for one of `signals` (from block_stop_signals()) and returns its name.
inline std::string_view wait_for_stop_signal(const sigset_t& signals) {
    int received = 0;
    sigwait(&signals, &received);
    return received == SIGTERM ? "SIGTERM" : "SIGINT";
}

}  // namespace seqinbox::cli
