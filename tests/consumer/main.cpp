// A program built against the INSTALLED seqinbox package (see run.cmake): exits 0 only if the
// installed headers work.
#include <seqinbox/declare/condition.hpp>
#include <seqinbox/error.hpp>

#include <cstdio>
#include <string>

int main() {
    using seqinbox::after;
    const auto released = seqinbox::all_of({after("orders.created"),
                                             seqinbox::any_of({after("billing.paid"), after("billing.waived")})});
    const auto processed = [](const std::string& type) { return type == "orders.created" || type == "billing.waived"; };
    const auto nothing = [](const std::string&) { return false; };

    int predecessors = 0;
    released.for_each_predecessor([&](const std::string&) { ++predecessors; });

    bool error_ok = false;
    try {
        throw seqinbox::error(seqinbox::error_category::configuration, "bad declaration", "42P01");
    } catch (const seqinbox::error& e) {
        error_ok = e.category() == seqinbox::error_category::configuration && e.sqlstate() == "42P01" &&
                   seqinbox::to_string(e.category()) == "configuration";
    }

    const bool ok = released.satisfied(processed) && !released.satisfied(nothing) && predecessors == 3 &&
                    seqinbox::condition{}.satisfied(nothing) && error_ok;
    std::puts(ok ? "seqinbox consumer: ok" : "seqinbox consumer: WRONG RESULT");
    return ok ? 0 : 1;
}
