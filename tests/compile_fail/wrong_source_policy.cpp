// A type that is not a message source must be rejected with a message naming the policy.
#include <seqinbox/inbox.hpp>
#include <seqinbox/memory/error_sink.hpp>
#include <seqinbox/memory/store.hpp>

struct not_a_source {};

int main() {
    return sizeof(seqinbox::basic_inbox<seqinbox::memory::store, not_a_source, seqinbox::memory::error_sink>) > 0 ? 0 : 1;
}
