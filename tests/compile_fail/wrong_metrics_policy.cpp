// A type that is not a metrics sink must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_metrics_sink {};

struct policies : seqinbox::default_policies {
    using metrics = not_a_metrics_sink;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
