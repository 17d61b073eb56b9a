// A type that is not a propagation policy must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_propagation_policy {};

struct policies : seqinbox::default_policies {
    using propagation = not_a_propagation_policy;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
