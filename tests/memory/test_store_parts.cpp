// The store concept's parts: a store needs savepoints only for a Propagation policy that joins
// the claim transaction, and a claim strategy needs only the part of the transaction it uses.
#define BOOST_TEST_MODULE store_parts
#include <boost/test/unit_test.hpp>

#include <utility>

#include "seqinbox/claim.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/propagation.hpp"
#include "support/world.hpp"

using namespace seqinbox;

namespace {

/// The in-memory store without SAVEPOINT and ROLLBACK TO SAVEPOINT.
class store_without_savepoints : public memory::store {
public:
    class transaction : public memory::store::transaction {
    public:
        explicit transaction(memory::store::transaction&& tx) : memory::store::transaction(std::move(tx)) {}
        savepoint_id savepoint() = delete;
        void rollback_to(savepoint_id) = delete;
    };

    transaction begin() { return transaction(memory::store::begin()); }
};

/// The in-memory store's inbox state without the claim: enough for check_then_insert alone.
class transaction_without_claim : public memory::store::transaction {
public:
    claim_result claim(const claim_request&) = delete;
};

}  // namespace

static_assert(seqinbox::store_policy<store_without_savepoints>);
static_assert(!savepoint_transaction<store_without_savepoints::transaction>);
static_assert(propagation_policy<propagation::not_supported, store_without_savepoints>);
static_assert(propagation_policy<propagation::requires_new, store_without_savepoints>);
static_assert(!propagation_policy<propagation::required, store_without_savepoints>, "joining T1 needs savepoints");
static_assert(savepoint_transaction<memory::store::transaction> && propagation_policy<propagation::required, memory::store>);

static_assert(!claim_transaction<transaction_without_claim> && inbox_state_transaction<transaction_without_claim>);
static_assert(claim_policy<claim::check_then_insert, transaction_without_claim>);
static_assert(!claim_policy<claim::insert_first, transaction_without_claim>);

BOOST_AUTO_TEST_CASE(an_inbox_on_a_store_without_savepoints_buffers_releases_and_closes) {
    store_without_savepoints store;
    memory::source source;
    memory::error_sink sink;
    seqinbox::basic_inbox<store_without_savepoints, memory::source, memory::error_sink> inbox(store, source, sink,
                                                                                             testing::order_declarations());
    testing::call_log calls;
    for (const auto& type : {"OrderCreated", "OrderValidated", "OrderPrepared", "OrderExpedited", "OrderShipped"})
        inbox.on(type, [&](const testing::message&, const auto& ctx) {
            calls.add({ctx.qualified_type, ctx.idempotence_id, ctx.context_id, ctx.replayed});
        });
    BOOST_TEST((inbox.deliver(testing::record("OrderValidated", "v1", "o1")).outcome == outcome::buffered));
    const auto created = inbox.deliver(testing::record("OrderCreated", "c1", "o1"));
    BOOST_TEST((created.outcome == outcome::processed));
    BOOST_TEST(created.released == 1u);
    for (const auto& [type, id] : {std::pair{"OrderPrepared", "p1"}, {"OrderExpedited", "e1"}, {"OrderShipped", "s1"}})
        BOOST_TEST((inbox.deliver(testing::record(type, id, "o1")).outcome == outcome::processed));
    BOOST_TEST(calls.size() == 5u);
    BOOST_TEST((store.find_instance("OrderSequence", "o1").value().state == instance_state::closed));
}
