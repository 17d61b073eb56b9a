// A type that is not an error sink must be rejected with a message naming the policy.
#include <seqinbox/inbox.hpp>
#include <seqinbox/memory/source.hpp>
#include <seqinbox/memory/store.hpp>

struct not_an_error_sink {};

int main() {
    return sizeof(seqinbox::basic_inbox<seqinbox::memory::store, seqinbox::memory::source, not_an_error_sink>) > 0 ? 0 : 1;
}
