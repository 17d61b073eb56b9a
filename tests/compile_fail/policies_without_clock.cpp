// A policy bundle that lacks a member type must be rejected with a message naming the member
// (and how to get every member: derive from seqinbox::default_policies).
#include <seqinbox/memory/inbox.hpp>

struct policies_without_clock {
    using claim = seqinbox::claim::insert_first;
    using propagation = seqinbox::propagation::not_supported;
    using decoder = seqinbox::decoder::header_decoder;
    using metrics = seqinbox::metrics::null_metrics;
    using logger = seqinbox::logger::null_logger;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies_without_clock>) > 0 ? 0 : 1;
}
