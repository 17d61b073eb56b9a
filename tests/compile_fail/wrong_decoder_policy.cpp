// A type that is not a decoder must be rejected with a message naming the policy.
#include <seqinbox/memory/inbox.hpp>

struct not_a_decoder {};

struct policies : seqinbox::default_policies {
    using decoder = not_a_decoder;
};

int main() {
    return sizeof(seqinbox::memory::basic_inbox<policies>) > 0 ? 0 : 1;
}
