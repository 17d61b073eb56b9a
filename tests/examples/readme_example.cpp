#include <iostream>
#include <seqinbox/logger/stream_logger.hpp>
#include <seqinbox/memory/inbox.hpp>

using namespace seqinbox;
using std::chrono::nanoseconds;

struct counting_metrics {  // a policy of our own: any type with these members will do
    int listeners_ok = 0;
    void consumed(std::string_view) { ++listeners_ok; }
    void buffered(std::string_view) {}
    void released(std::string_view, nanoseconds) {}
    void failed(std::string_view) {}
    void duplicate(std::string_view) {}
    void handled(std::string_view, nanoseconds) {}
};
struct order_policies : default_policies {  // the defaults, but for the two named here
    using metrics = counting_metrics;
    using logger = seqinbox::logger::stream_logger;  // qualified: inside, `logger` is the member
};
using order_inbox = memory::basic_inbox<order_policies>;

int main() {
    auto by_key = [](const std::string&, const envelope& e) { return e.key; };
    declarations<std::string> decls;
    decls.sequences.push_back({"OrderSequence", std::chrono::hours(24),
                               {{.type = "OrderCreated", .context_id = by_key},
                                {.type = "OrderShipped", .context_id = by_key, .release = after("OrderCreated")}}});
    memory::store store;
    memory::source source;
    memory::error_sink dead_letters;
    order_inbox inbox(store, source, dead_letters, decls, {.logger = logger::stream_logger(std::cout)});
    auto print = [](const std::string& body, const order_inbox::context&) { std::cout << "  listener: " << body << '\n'; };
    inbox.on("OrderCreated", print).on("OrderShipped", print);
    auto msg = [](std::string type, std::string id) {
        return envelope{.key = "order-1", .value = type + " " + id, .headers = {{"message-type", type}, {"idempotence-id", id}}};
    };
    source.push(msg("OrderShipped", "s-1"));  // arrives first: buffered
    source.push(msg("OrderCreated", "c-1"));  // processed, then releases OrderShipped
    source.push(msg("OrderCreated", "c-1"));  // a duplicate: skipped
    inbox.drain();
    return inbox.metrics().listeners_ok == 2 ? 0 : 1;
}
