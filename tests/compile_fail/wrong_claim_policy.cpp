// A type that is not a claim strategy must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_claim_strategy {};

struct policies : seqinbox::default_policies {
    using claim = not_a_claim_strategy;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
