#pragma once
// A memory inbox fed through its source, for engine tests that check a delivery is decided and
// acknowledged: store, source, error sink and a log of every listener call.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <utility>

#include "seqinbox/memory/inbox.hpp"
#include "support/world.hpp"

namespace seqinbox::testing {

struct polling_world {
    memory::store store;
    memory::source source;
    memory::error_sink sink;
    call_log calls;

    std::unique_ptr<memory::inbox> make(declarations<message> decls) {
        auto inbox = std::make_unique<memory::inbox>(store, source, sink, std::move(decls));
        record_all(*inbox, calls);
        return inbox;
    }

    /// Delivers through the source and checks the delivery was acknowledged.
    delivery_result poll(memory::inbox& inbox, const envelope& e) {
        source.push(e);
        auto result = inbox.poll_once();
        BOOST_TEST_REQUIRE(result.has_value());
        BOOST_TEST(source.in_flight() == 0u);
        return *result;
    }
};

/// One sequence "S" of one type.
inline declarations<message> single(message_declaration<message> m) {
    declarations<message> d;
    d.sequences.push_back({"S", std::chrono::hours(1), {std::move(m)}});
    return d;
}

}  // namespace seqinbox::testing
