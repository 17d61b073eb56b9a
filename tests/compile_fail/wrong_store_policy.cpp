// A type that is not a store must be rejected with a message naming the policy.
#include <seqinbox/inbox.hpp>
#include <seqinbox/memory/error_sink.hpp>
#include <seqinbox/memory/source.hpp>

struct not_a_store {
    struct transaction {};
};

int main() {
    return sizeof(seqinbox::basic_inbox<not_a_store, seqinbox::memory::source, seqinbox::memory::error_sink>) > 0 ? 0 : 1;
}
