// Must not compile: a release condition is built from qualified type names
// (seqinbox::after("billing.invoice_created")), never converted from a number.
#include <seqinbox/declare/condition.hpp>

int main() {
    seqinbox::condition c = 42;
    return c.is_always() ? 0 : 1;
}
