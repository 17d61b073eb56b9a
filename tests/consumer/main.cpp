// A program built against the INSTALLED seqinbox package (see run.cmake): exits 0 only if an
// inbox built from the installed headers sequences and deduplicates correctly.
#include <seqinbox/memory/inbox.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
    using namespace seqinbox;
    auto by_key = [](const std::string&, const envelope& e) { return e.key; };
    declarations<std::string> decls;
    decls.sequences.push_back({"Billing", std::chrono::hours(1),
                               {{.type = "Invoiced", .context_id = by_key},
                                {.type = "Paid", .context_id = by_key, .release = after("Invoiced")}}});
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    memory::inbox inbox(store, source, sink, decls);
    std::vector<std::string> seen;
    auto record = [&](const std::string& body, const memory::inbox::context&) { seen.push_back(body); };
    inbox.on("Invoiced", record).on("Paid", record);
    auto msg = [](std::string type, std::string id) {
        return envelope{.key = "invoice-7", .value = type, .headers = {{"message-type", type}, {"idempotence-id", id}}};
    };
    for (auto m : {msg("Paid", "p"), msg("Invoiced", "i"), msg("Paid", "p")}) source.push(m);
    inbox.drain();

    const bool ok = seen == std::vector<std::string>{"Invoiced", "Paid"} && sink.size() == 0 &&
                    store.instances().at(0).state == instance_state::closed;
    std::puts(ok ? "seqinbox consumer: ok" : "seqinbox consumer: WRONG RESULT");
    return ok ? 0 : 1;
}
