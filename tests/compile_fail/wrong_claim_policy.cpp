// A type that is not a claim strategy must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_claim_strategy {};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<not_a_claim_strategy>) > 0 ? 0 : 1;
}
