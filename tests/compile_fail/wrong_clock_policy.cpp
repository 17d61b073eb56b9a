// A type that is not a clock must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_clock {};

struct policies : seqinbox::default_policies {
    using clock = not_a_clock;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
