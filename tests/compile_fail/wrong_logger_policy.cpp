// A type that is not a logger must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_logger {};

struct policies : seqinbox::default_policies {
    using logger = not_a_logger;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
