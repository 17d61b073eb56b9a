// seqinbox::postgresql::store::transaction::claim_batch against a throwaway server: results in
// request order, won and lost claims, a key held by another open transaction, the key's rows and
// the instance's types read under the lock, one lock per instance taken in id order after every
// claim, instances removed meanwhile, deadlocks, the round trips a batch costs, and the
// creation of many contexts' instances in one statement.
#define BOOST_TEST_MODULE seqinbox postgresql claim batch
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pg_test_support.hpp"
#include "support/world.hpp"
#include "seqinbox/error.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace pg = seqinbox::postgresql;
namespace si = seqinbox;
using seqinbox::test::count;
using seqinbox::test::pg_server;
using namespace std::chrono_literals;

namespace {

struct batch_fixture {
    static std::string migrated_database() {
        std::string conninfo = pg_server::shared().create_database();
        pg::migrate(conninfo);
        return conninfo;
    }

    pg::store_options options() const {
        pg::store_options o;
        o.conninfo = conninfo;
        o.pool_size = 4;
        return o;
    }

    si::instance_id instance(const std::string& context_id) {
        const auto now = std::chrono::system_clock::now();
        return store.create_or_get_instance("OrderSequence", context_id, now, now + 24h).id;
    }

    static si::message_record row(si::instance_id instance, const std::string& type, const std::string& id, si::message_state state) {
        si::message_record r;
        r.instance = instance;
        r.type = type;
        r.idempotence_id = id;
        r.state = state;
        return r;
    }

    /// A committed row of `type` and `id` in `instance`, as an earlier delivery left it.
    void stored(si::instance_id instance, const std::string& type, const std::string& id, si::message_state state) {
        BOOST_TEST_REQUIRE((store.store_message(row(instance, type, id, state)) == si::stored_as::inserted));
    }

    /// Waits until another backend of this database waits for a lock in a statement matching `like`.
    void wait_for_lock_waiter(const std::string& like) const {
        soci::session observer(soci::postgresql, conninfo);
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (count(observer, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted"
                               " AND a.datname = current_database() AND a.query ILIKE '" + like + "'") == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                std::string activity;
                observer << "SELECT string_agg(coalesce(wait_event_type, '-') || ': ' || left(query, 300), E'\\n')"
                            " FROM pg_stat_activity WHERE datname = current_database()",
                    soci::into(activity);
                BOOST_TEST_MESSAGE(activity);
                throw std::runtime_error("no backend waits in " + like + ":\n" + activity);
            }
            std::this_thread::sleep_for(2ms);
        }
    }

    /// Whether a transaction other than the caller's holds a row lock on the instance.
    bool locked_elsewhere(si::instance_id instance) const {
        soci::session probe(soci::postgresql, conninfo);
        try {
            probe << "SELECT id FROM sequence_instance WHERE id = " + std::to_string(instance) + " FOR NO KEY UPDATE NOWAIT";
            return false;
        } catch (const soci::soci_error&) {
            return true;
        }
    }

    std::string conninfo = migrated_database();
    pg::store store{options()};
};

/// Rolls `tx` back when a check fails while a thread waits for it (declared after that thread's
/// future, it ends first, so that the future's destructor does not wait forever).
struct rolled_back_on_exit {
    pg::store::transaction& tx;
    ~rolled_back_on_exit() {
        if (tx.active()) tx.rollback();
    }
};

si::claim_request request(const std::string& type, const std::string& id, si::instance_id instance) {
    return {{type, id}, instance, std::chrono::system_clock::now()};
}

}  // namespace

/// The engine on a store, with a listener on every declared type that counts its calls.
struct counted_inbox {
    si::memory::source source;
    si::memory::error_sink sink;
    si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink> inbox;
    std::size_t calls = 0;

    explicit counted_inbox(pg::store& store) : inbox(store, source, sink, si::testing::order_declarations()) {
        for (const auto& msg : inbox.declared().sequences.at(0).messages)
            inbox.on(msg.qualified_type(), [this](const si::testing::message&, const auto&) { ++calls; });
    }
    counted_inbox(const counted_inbox&) = delete;
    counted_inbox& operator=(const counted_inbox&) = delete;
};

BOOST_FIXTURE_TEST_SUITE(postgresql_claim_batch, batch_fixture)

BOOST_AUTO_TEST_CASE(results_come_in_request_order_and_a_committed_claim_loses) {
    const auto first = instance("o-1"), second = instance("o-2");
    {
        auto earlier = store.begin();
        BOOST_TEST_REQUIRE(earlier.claim(request("OrderCreated", "b", first)).won);
        earlier.commit();
    }
    const std::vector<si::claim_request> requests{request("OrderCreated", "c", second), request("OrderCreated", "b", first),
                                                  request("OrderCreated", "a \"quoted\" \\ {key}, too", first)};
    auto tx = store.begin();
    const auto results = tx.claim_batch(requests);
    BOOST_TEST_REQUIRE(results.size() == 3u);
    BOOST_TEST(results[0].won);
    BOOST_TEST(results[0].locked.row.id == second);
    BOOST_TEST(results[0].locked.row.context_id == "o-2");
    BOOST_TEST(!results[1].won);
    BOOST_TEST(results[1].locked.row.id == 0);  // a lost claim carries nothing
    BOOST_TEST(results[2].won);
    BOOST_TEST(results[2].locked.row.id == first);
    BOOST_TEST(results[2].locked.row.sequence == "OrderSequence");
    BOOST_TEST(tx.find_messages(requests[2].key).empty());
    tx.commit();
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence") == 3);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence WHERE idempotence_id = 'a \"quoted\" \\ {key}, too'") == 1);
}

BOOST_AUTO_TEST_CASE(won_claims_read_their_rows_and_their_instances_types_under_the_lock) {
    const auto first = instance("o-1"), second = instance("o-2");
    stored(first, "OrderCreated", "created-1", si::message_state::processed);
    stored(first, "OrderShipped", "shipped-1", si::message_state::waiting);
    stored(first, "OrderValidated", "v-1", si::message_state::failed);  // an earlier attempt failed
    stored(second, "OrderPrepared", "p-2", si::message_state::failed);  // FAILED rows are no type
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderValidated", "v-1", first), request("OrderPrepared", "p-1", first),
                                                  request("OrderPrepared", "p-2", second)};
    const auto results = tx.claim_batch(requests);
    BOOST_TEST_REQUIRE((results[0].won && results[1].won && results[2].won));
    BOOST_TEST_REQUIRE(results[0].rows.size() == 1u);
    BOOST_TEST((results[0].rows[0].state == si::message_state::failed));
    BOOST_TEST(results[0].rows[0].instance == first);
    BOOST_TEST(results[0].rows[0].idempotence_id == "v-1");
    BOOST_TEST(results[1].rows.empty());
    BOOST_TEST(results[2].rows.size() == 1u);
    const auto& types = results[0].locked.types;
    BOOST_TEST(types.processed == std::vector<std::string>{"OrderCreated"});
    BOOST_TEST(types.waiting == std::vector<std::string>{"OrderShipped"});
    BOOST_TEST(results[1].locked.row.id == results[0].locked.row.id);  // one lock per instance
    BOOST_TEST(results[1].locked.types.processed == types.processed);
    BOOST_TEST(results[2].locked.types.processed.empty());
    BOOST_TEST(results[2].locked.types.waiting.empty());
    BOOST_TEST(locked_elsewhere(first));
    BOOST_TEST(locked_elsewhere(second));
    tx.rollback();
    BOOST_TEST(!locked_elsewhere(first));
}

BOOST_AUTO_TEST_CASE(a_batch_of_lost_claims_locks_nothing) {
    const auto first = instance("o-1");
    {
        auto earlier = store.begin();
        BOOST_TEST_REQUIRE(earlier.claim(request("OrderCreated", "a", first)).won);
        earlier.commit();
    }
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderCreated", "a", first)};
    BOOST_TEST(!tx.claim_batch(requests).at(0).won);
    BOOST_TEST(!locked_elsewhere(first));
}

BOOST_AUTO_TEST_CASE(a_key_another_transaction_holds_waits_then_loses_on_commit_and_wins_on_rollback) {
    const auto first = instance("o-1");
    for (const bool holder_commits : {true, false}) {
        const std::string id = holder_commits ? "held-then-committed" : "held-then-rolled-back";
        auto holder = store.begin();
        BOOST_TEST_REQUIRE(holder.claim(request("OrderCreated", id, first)).won);
        auto waiting = std::async(std::launch::async, [&] {
            auto tx = store.begin();
            const std::vector<si::claim_request> requests{request("OrderCreated", "free-" + id, first), request("OrderCreated", id, first)};
            auto results = tx.claim_batch(requests);
            tx.commit();
            return results;
        });
        const rolled_back_on_exit guard{holder};
        wait_for_lock_waiter("%insert%sequential_inbox_idempotence%");
        if (holder_commits) holder.commit();
        else holder.rollback();
        const auto results = waiting.get();
        BOOST_TEST(results[0].won);
        BOOST_TEST(results[1].won == !holder_commits, id);
    }
}

// Claims first, then locks in id order: while the batch waits for the lock of the instance with
// the higher id, which it requested first, it already holds the lower one's.
BOOST_AUTO_TEST_CASE(instance_locks_are_taken_in_id_order_after_every_claim) {
    const auto lower = instance("o-1"), higher = instance("o-2");
    BOOST_TEST_REQUIRE(lower < higher);
    auto holder = store.begin();
    holder.lock_instance(higher);
    auto waiting = std::async(std::launch::async, [&] {
        auto tx = store.begin();
        const std::vector<si::claim_request> requests{request("OrderCreated", "on-higher", higher), request("OrderCreated", "on-lower", lower)};
        auto results = tx.claim_batch(requests);
        tx.commit();
        return results;
    });
    const rolled_back_on_exit guard{holder};
    wait_for_lock_waiter("WITH requested AS%");  // no claim conflicts here: the lock of `higher` (the text is cut before FOR NO KEY UPDATE)
    BOOST_TEST(locked_elsewhere(lower));
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequential_inbox_idempotence") == 0);  // not committed yet
    holder.rollback();
    const auto results = waiting.get();
    BOOST_TEST((results[0].won && results[1].won));
    BOOST_TEST(results[0].locked.row.id == higher);
    BOOST_TEST(results[1].locked.row.id == lower);
}

BOOST_AUTO_TEST_CASE(an_instance_removed_meanwhile_makes_the_batch_retryable_and_is_forgotten) {
    const auto kept = instance("o-1"), doomed = instance("o-2");
    {
        pg::store other(options());
        seqinbox::test::mark_due_for_removal(conninfo, doomed);
        BOOST_TEST_REQUIRE(other.remove_instance(doomed, si::removal_condition::expired(std::chrono::system_clock::now()),
                                                 [](const si::sequence_instance&, std::span<const si::message_record>) {}));
    }
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderCreated", "a", kept), request("OrderCreated", "b", doomed)};
    try {
        tx.claim_batch(requests);
        BOOST_FAIL("a batch claiming on a removed instance succeeded");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "retryable");
        BOOST_TEST(e.sqlstate() == "23503");
        BOOST_TEST(std::string(e.what()).find("one of " + std::to_string(kept) + ", " + std::to_string(doomed)) != std::string::npos,
                   e.what());
    }
    tx.rollback();
    BOOST_TEST(instance("o-2") != doomed);  // read afresh
}

// Two transactions each holding a claim the other's batch requests: PostgreSQL reports the
// deadlock to one of them, whose batch is then retryable; the other goes on.
BOOST_AUTO_TEST_CASE(a_deadlock_makes_the_batch_retryable) {
    const auto first = instance("o-1"), second = instance("o-2");  // one instance would serialise them
    auto one = store.begin();
    auto two = store.begin();
    BOOST_TEST_REQUIRE(one.claim(request("OrderCreated", "k1", first)).won);
    BOOST_TEST_REQUIRE(two.claim(request("OrderCreated", "k2", second)).won);
    const auto claim_other = [&](pg::store::transaction& tx, const std::string& other, si::instance_id on) {
        return std::async(std::launch::async, [&tx, other, on]() -> std::string {
            try {
                const std::vector<si::claim_request> requests{request("OrderCreated", other, on)};
                tx.claim_batch(requests);
                return "went on";
            } catch (const si::error& e) {
                tx.rollback();  // releases the claim the other one waits for
                return std::string(to_string(e.category())) + " " + e.sqlstate();
            }
        });
    };
    auto a = claim_other(one, "k2", second);
    auto b = claim_other(two, "k1", first);
    const std::vector<std::string> outcomes{a.get(), b.get()};
    BOOST_TEST((std::ranges::count(outcomes, "retryable 40P01") == 1), outcomes[0] + " / " + outcomes[1]);
    BOOST_TEST((std::ranges::count(outcomes, "went on") == 1), outcomes[0] + " / " + outcomes[1]);
}

BOOST_AUTO_TEST_CASE(a_key_requested_twice_is_a_misuse_naming_it) {
    const auto first = instance("o-1");
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderCreated", "twice", first), request("OrderCreated", "once", first),
                                                  request("OrderCreated", "twice", first)};
    try {
        tx.claim_batch(requests);
        BOOST_FAIL("a batch with a key twice was claimed");
    } catch (const si::error& e) {
        BOOST_TEST(to_string(e.category()) == "misuse");
        BOOST_TEST(std::string(e.what()).find("(OrderCreated, twice)") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(a_batch_of_a_hundred_claims_costs_one_round_trip_with_begin) {
    const auto first = instance("o-1"), second = instance("o-2");
    std::vector<si::claim_request> requests;
    for (int i = 0; i < 100; ++i) requests.push_back(request("OrderCreated", "m-" + std::to_string(i), i % 2 == 0 ? first : second));
    auto tx = store.begin();
    const auto before = store.statistics().round_trips;
    const auto results = tx.claim_batch(requests);
    BOOST_TEST(store.statistics().round_trips - before == 1u);
    BOOST_TEST(std::ranges::count_if(results, [](const si::claim_result& r) { return r.won; }) == 100);
    const std::vector<si::claim_request> none;
    BOOST_TEST(tx.claim_batch(none).empty());
    BOOST_TEST(store.statistics().round_trips - before == 1u);
    tx.commit();
}

// What a batch of deliveries writes per record: its row stored (on a key claimed without rows,
// deferred, its outcome known), states updated, instances closed. Sent with COMMIT.
BOOST_AUTO_TEST_CASE(a_batch_of_a_hundred_deliveries_costs_two_round_trips) {
    std::vector<si::instance_id> instances;
    for (int i = 0; i < 10; ++i) instances.push_back(instance("o-" + std::to_string(i)));
    std::vector<si::claim_request> requests;
    for (int i = 0; i < 100; ++i) requests.push_back(request("OrderCreated", "m-" + std::to_string(i), instances[i % 10]));
    auto tx = store.begin();
    const auto before = store.statistics().round_trips;
    const auto results = tx.claim_batch(requests);
    for (std::size_t i = 0; i < requests.size(); ++i) {
        BOOST_TEST_REQUIRE(results[i].won);
        const auto& key = requests[i].key;
        BOOST_TEST((tx.store_message(row(requests[i].instance, key.type, key.idempotence_id, si::message_state::processed)) ==
                    si::stored_as::inserted));
    }
    for (const auto id : instances) tx.close_instance(id, std::chrono::system_clock::now());
    tx.commit();
    BOOST_TEST(store.statistics().round_trips - before == 2u);  // BEGIN and the claims; the writes and COMMIT
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 100);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance WHERE state = 'CLOSED'") == 10);
}

// A deferred store keeps what the immediate one keeps: the record (bytes, a NULL key, headers
// with an empty and a binary value, trace context), to be replayed.
BOOST_AUTO_TEST_CASE(a_deferred_store_keeps_the_whole_record) {
    const auto first = instance("o-1");
    si::envelope record;
    record.value = std::string("v\0alue", 6);
    record.topic = "orders";
    record.cluster = "main";
    record.partition = 3;
    record.offset = 42;
    record.headers = {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                      {"empty", ""},
                      {"bytes", std::string("\xff\x00", 2)}};
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderShipped", "s-1", first)};
    BOOST_TEST_REQUIRE(tx.claim_batch(requests).at(0).won);
    auto waiting_row = row(first, "OrderShipped", "s-1", si::message_state::waiting);
    waiting_row.payload = record;
    BOOST_TEST((tx.store_message(waiting_row) == si::stored_as::inserted));
    const std::vector<std::string> types{"OrderShipped"};
    const auto waiting = tx.waiting_messages(first, types);  // reads after the deferred write
    BOOST_TEST_REQUIRE(waiting.size() == 1u);
    const si::envelope& stored = *waiting[0].payload;
    BOOST_TEST(!stored.key.has_value());
    BOOST_TEST((stored.value == record.value));
    BOOST_TEST(stored.topic == "orders");
    BOOST_TEST(stored.cluster == "main");
    BOOST_TEST(stored.partition == 3);
    BOOST_TEST(stored.offset == 42);
    BOOST_TEST_REQUIRE(stored.headers.size() == 3u);
    BOOST_TEST(stored.headers[1].value.empty());
    BOOST_TEST((stored.headers[2].value == record.headers[2].value));
    tx.commit();
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE traceparent LIKE '00-0af7%'") == 1);
}

// A key with rows is stored at once: its outcome depends on them.
BOOST_AUTO_TEST_CASE(a_claimed_key_with_a_failed_row_is_stored_at_once_and_updated) {
    const auto first = instance("o-1");
    stored(first, "OrderCreated", "f-1", si::message_state::failed);
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderCreated", "f-1", first)};
    BOOST_TEST_REQUIRE(tx.claim_batch(requests).at(0).won);
    const auto before = store.statistics().round_trips;
    BOOST_TEST((tx.store_message(row(first, "OrderCreated", "f-1", si::message_state::processed)) == si::stored_as::updated));
    BOOST_TEST(store.statistics().round_trips - before == 1u);
    tx.commit();
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 1);
}

// The deferred stores travel together in one statement (seqinbox_store_messages). A row a
// state step beside a dead claim transaction stored meanwhile is found under the key's lock and
// handled as seqinbox_store_message would: a PROCESSED row kept, a FAILED row updated; the
// other keys are inserted, no key gets a second row.
BOOST_AUTO_TEST_CASE(deferred_stores_go_together_and_respect_rows_stored_meanwhile) {
    const auto first = instance("o-1");
    auto tx = store.begin();
    const std::vector<si::claim_request> requests{request("OrderCreated", "kept", first), request("OrderCreated", "updated", first),
                                                  request("OrderCreated", "new-1", first), request("OrderCreated", "new-2", first)};
    for (const auto& result : tx.claim_batch(requests)) BOOST_TEST_REQUIRE(result.won);
    stored(first, "OrderCreated", "kept", si::message_state::processed);  // beside: committed on another connection
    stored(first, "OrderCreated", "updated", si::message_state::failed);
    const auto before = store.statistics().round_trips;
    for (const auto& r : requests)
        BOOST_TEST((tx.store_message(row(first, r.key.type, r.key.idempotence_id, si::message_state::waiting)) == si::stored_as::inserted));
    BOOST_TEST(store.statistics().round_trips - before == 0u);  // deferred: the outcome said is the one expected
    tx.commit();
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message") == 4);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'kept' AND state = 'PROCESSED'") == 1);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE idempotence_id = 'updated' AND state = 'WAITING'") == 1);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE idempotence_id LIKE 'new-%' AND state = 'WAITING'") == 2);
}

// The array literals of seqinbox_store_messages carry any text and bytes: ids with quotes,
// backslashes, commas, braces and non-ASCII letters, absent and empty keys and values, binary
// header values, a traceparent or none, a value of a megabyte; every record comes back whole.
BOOST_AUTO_TEST_CASE(deferred_stores_of_many_rows_keep_every_id_and_record) {
    const auto first = instance("o-1");
    const std::vector<std::string> ids{"a\"b", "back\\slash", "comma,brace{}", "NULL", "\u00fcber \u65e5\u672c", " spaced ", "q'uote", "}{\",\\"};
    std::vector<si::envelope> records;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        si::envelope r;
        if (i % 3 == 1) r.key = std::string();
        if (i % 3 == 2) r.key = std::string("k\0\"{,}", 6);
        if (i % 2 == 0) r.value = i == 4 ? std::string(1 << 20, 'x') : std::string("v\0\\\"", 4);
        if (i == 3) r.value = std::string();
        if (i % 2 == 1) r.headers = {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {"h\"{,}", std::string("\xff\x00\"", 3)}};
        if (i == 6) r.headers = {{"", ""}};
        r.topic = "to\"pic,{}";
        r.cluster = i % 2 == 0 ? "" : "c\\l";
        r.partition = static_cast<std::int32_t>(i);
        r.offset = static_cast<std::int64_t>(i) * 1000;
        records.push_back(r);
    }
    auto tx = store.begin();
    std::vector<si::claim_request> requests;
    for (const auto& id : ids) requests.push_back(request("OrderShipped", id, first));
    for (const auto& result : tx.claim_batch(requests)) BOOST_TEST_REQUIRE(result.won);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto waiting_row = row(first, "OrderShipped", ids[i], si::message_state::waiting);
        waiting_row.payload = records[i];
        BOOST_TEST((tx.store_message(waiting_row) == si::stored_as::inserted));
    }
    tx.commit();
    auto reader = store.begin();
    const std::vector<std::string> types{"OrderShipped"};
    const auto waiting = reader.waiting_messages(first, types);
    reader.rollback();
    BOOST_TEST_REQUIRE(waiting.size() == ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        BOOST_TEST_CONTEXT("row " << i) {
            BOOST_TEST(waiting[i].idempotence_id == ids[i]);
            BOOST_TEST_REQUIRE(waiting[i].payload.has_value());
            const si::envelope& back = *waiting[i].payload;
            BOOST_TEST((back.key == records[i].key));
            BOOST_TEST((back.value == records[i].value));
            BOOST_TEST(back.topic == records[i].topic);
            BOOST_TEST(back.cluster == records[i].cluster);
            BOOST_TEST(back.partition == records[i].partition);
            BOOST_TEST(back.offset == records[i].offset);
            BOOST_TEST_REQUIRE(back.headers.size() == records[i].headers.size());
            for (std::size_t h = 0; h < back.headers.size(); ++h) {
                BOOST_TEST(back.headers[h].name == records[i].headers[h].name);
                BOOST_TEST((back.headers[h].value == records[i].headers[h].value));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(instances_of_many_contexts_are_created_or_read_in_one_round_trip) {
    const auto known = instance("o-known");  // in the cache
    {
        pg::store other(options());  // on the server, not in this store's cache
        const auto now = std::chrono::system_clock::now();
        other.create_or_get_instance("OrderSequence", "o-elsewhere", now, now + 24h);
    }
    const auto now = std::chrono::system_clock::now();
    std::vector<si::instance_creation> requests;
    for (const std::string context : {"o-new-2", "o-elsewhere", "o-known", "o-new-1", "o-new-2"})
        requests.push_back({"OrderSequence", context, now, now + 24h});
    const auto before = store.statistics().round_trips;
    const auto instances = store.create_or_get_instances(requests);
    BOOST_TEST(store.statistics().round_trips - before == 1u);
    BOOST_TEST_REQUIRE(instances.size() == 5u);
    for (std::size_t i = 0; i < requests.size(); ++i) BOOST_TEST(instances[i].context_id == requests[i].context_id);
    BOOST_TEST(instances[2].id == known);
    BOOST_TEST(instances[0].id == instances[4].id);
    BOOST_TEST((instances[3].state == si::instance_state::open));
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequence_instance") == 4);
    const auto again = store.statistics().round_trips;
    BOOST_TEST(store.create_or_get_instances(requests).at(1).id == instances[1].id);
    BOOST_TEST(store.statistics().round_trips - again == 0u);  // all remembered now
}

// The engine on this store: contexts whose messages come last first, each message twice, are
// decided in three round trips whatever the batch's size: the instances, the claims, the writes
// with COMMIT. A duplicate of a key the batch claimed is not claimed again, and a message
// buffered and released within the batch is stored once, PROCESSED, without a read.
BOOST_AUTO_TEST_CASE(an_inbox_batch_of_reversed_contexts_with_duplicates_costs_three_round_trips) {
    counted_inbox counted(store);
    auto& inbox = counted.inbox;
    auto& calls = counted.calls;
    const auto reversed_twice = [](int first_context) {
        std::vector<si::envelope> records;
        for (int c = first_context; c < first_context + 10; ++c)
            for (const std::string type : {"OrderShipped", "OrderPrepared", "OrderValidated", "OrderCreated"})
                for (int copy = 0; copy < 2; ++copy)
                    records.push_back(si::testing::record(type, type + "-" + std::to_string(c), "order-" + std::to_string(c)));
        return records;
    };
    inbox.deliver_batch(reversed_twice(100));  // prepares the connection's statements
    calls = 0;
    const auto before = store.statistics().round_trips;
    const auto results = inbox.deliver_batch(reversed_twice(0));
    BOOST_TEST(store.statistics().round_trips - before == 3u);
    BOOST_TEST(calls == 40u);
    BOOST_TEST(std::ranges::count_if(results, [](const si::delivery_result& r) { return r.outcome == si::outcome::duplicate; }) == 40);
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED' AND key IS NOT NULL") == 60);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message") == 80);
}

// Messages that waited since earlier batches are released in one read per batch: the rows the
// batch's release passes may reach are read ahead with the claims' answers, for every instance
// at once, instead of one read per release pass (35 of them per batch of the relay's workload).
BOOST_AUTO_TEST_CASE(releases_of_messages_waiting_from_earlier_batches_cost_one_read_per_batch) {
    si::memory::source source;
    si::memory::error_sink sink;
    si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink> inbox(store, source, sink, si::testing::order_declarations());
    std::vector<std::string> released;
    for (const auto& msg : inbox.declared().sequences.at(0).messages)
        inbox.on(msg.qualified_type(), [&](const si::testing::message&, const auto& c) { released.push_back(std::string(*c.record.value)); });
    const auto orders = [](int first_context, std::vector<std::string> types) {
        std::vector<si::envelope> records;
        for (int c = first_context; c < first_context + 10; ++c)
            for (const auto& type : types) {
                const std::string id = type + "-" + std::to_string(c);
                auto r = si::testing::record(type, id, "order-" + std::to_string(c));
                r.value = "value of " + id;
                records.push_back(std::move(r));
            }
        return records;
    };
    for (int first : {100, 0}) {  // the first round prepares the connection's statements
        inbox.deliver_batch(orders(first, {"OrderShipped", "OrderPrepared", "OrderValidated"}));
        BOOST_TEST_REQUIRE(released.empty());
        const auto before = store.statistics().round_trips;
        const auto results = inbox.deliver_batch(orders(first, {"OrderCreated"}));
        // The instances are known from the first batch: the claims, the rows read ahead, the writes with COMMIT.
        if (first == 0) BOOST_TEST(store.statistics().round_trips - before == 3u);
        for (const auto& r : results) BOOST_TEST(r.released == 3u);
        std::vector<std::string> expected;  // each order in its declared order (else arrival), records intact
        for (int c = first; c < first + 10; ++c)
            for (const std::string type : {"OrderCreated", "OrderPrepared", "OrderValidated", "OrderShipped"})
                expected.push_back("value of " + type + "-" + std::to_string(c));
        BOOST_TEST(released == expected, boost::test_tools::per_element());
        released.clear();
    }
    soci::session s(soci::postgresql, conninfo);
    BOOST_TEST(count(s, "SELECT count(*) FROM sequenced_message WHERE state = 'PROCESSED'") == 80);
}

// What waits behind a type nothing in the batch can process is not read: fifty OrderShipped
// wait for OrderValidated, and a batch bringing only OrderCreated releases nothing, so it reads
// none of their records (the read ahead follows dependents only through types that may be
// processed: waiting, or delivered in the batch).
BOOST_AUTO_TEST_CASE(a_batch_reads_no_waiting_rows_its_releases_cannot_reach) {
    counted_inbox counted(store);
    auto& inbox = counted.inbox;
    auto& calls = counted.calls;
    for (const std::string order : {"warm-up", "o-1"}) {  // the first round prepares the connection's statements
        std::vector<si::envelope> shipped;
        for (int k = 0; k < 50; ++k) shipped.push_back(si::testing::record("OrderShipped", order + "-shipped-" + std::to_string(k), order));
        inbox.deliver_batch(shipped);
        const auto before = store.statistics().round_trips;
        const auto results = inbox.deliver_batch(std::vector{si::testing::record("OrderCreated", order + "-created", order)});
        if (order == "o-1") BOOST_TEST(store.statistics().round_trips - before == 2u);  // the claims, the writes with COMMIT
        BOOST_TEST((results.at(0).outcome == si::outcome::processed));
        BOOST_TEST(results.at(0).released == 0u);
    }
    BOOST_TEST(calls == 2u);
}

// Each statement of a batch reaches the tables through an index probe per key, whatever the
// tables' size: on tables of some ten thousand rows the planner preferred a hashed join over
// the whole table for a hundred keys (its cost growing with the tables; the relay on batches
// slowed to a tenth). auto_explain logs every plan of this database, nested ones included.
BOOST_AUTO_TEST_CASE(batch_statements_probe_indexes_on_large_tables) {
    soci::session s(soci::postgresql, conninfo);
    s << "INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until, closed_at)"
         " SELECT 'OrderSequence', 'old-' || g, 'CLOSED', now(), now() + interval '1 day', now() FROM generate_series(1, 10000) AS g";
    s << "INSERT INTO sequential_inbox_idempotence (message_type, idempotence_id, sequence_instance_id, created_at)"
         " SELECT 'OrderCreated', 'old-' || g, i.id, now() FROM generate_series(1, 30000) AS g"
         " JOIN sequence_instance i ON i.context_id = 'old-' || (g % 10000 + 1)";
    s << "INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)"
         " SELECT sequence_instance_id, message_type, idempotence_id, 'PROCESSED', now(), now() FROM sequential_inbox_idempotence";
    s << "ANALYZE";
    std::string database;
    s << "SELECT current_database()", soci::into(database);
    s << "ALTER DATABASE " + database + " SET session_preload_libraries = 'auto_explain'";
    s << "ALTER DATABASE " + database + " SET auto_explain.log_min_duration = 0";
    s << "ALTER DATABASE " + database + " SET auto_explain.log_nested_statements = on";
    pg::store explained{options()};  // its connections start with the settings above
    si::memory::source source;
    si::memory::error_sink sink;
    si::basic_inbox<pg::store, si::memory::source, si::memory::error_sink> inbox(explained, source, sink, si::testing::order_declarations());
    for (const auto& msg : inbox.declared().sequences.at(0).messages)
        inbox.on(msg.qualified_type(), [](const si::testing::message&, const auto&) {});
    const auto server_log = [] {
        std::ifstream in(pg_server::shared().directory() / "server.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto log_before = server_log().size();
    for (int round = 0; round < 8; ++round) {  // past the five custom plans of a prepared statement
        // Half the orders wait for their first message until a batch of their own (its release
        // passes read rows ahead), the other half come whole.
        std::vector<si::envelope> records, firsts;
        for (int c = 0; c < 30; ++c)
            for (const std::string type : {"OrderShipped", "OrderPrepared", "OrderValidated", "OrderCreated"})
                (c < 15 && type == "OrderCreated" ? firsts : records)
                    .push_back(si::testing::record(type, type + "-" + std::to_string(round) + "-" + std::to_string(c),
                                                   "order-" + std::to_string(round) + "-" + std::to_string(c)));
        inbox.deliver_batch(records);
        inbox.deliver_batch(firsts);
    }
    const std::string plans = server_log().substr(log_before);
    BOOST_TEST_REQUIRE(plans.find("auto_explain") == std::string::npos);  // (a misspelt setting would say so)
    BOOST_TEST_REQUIRE(plans.find("Insert on sequential_inbox_idempotence") != std::string::npos, "no plan was logged");
    for (const std::string table : {"sequenced_message", "sequence_instance", "sequential_inbox_idempotence"}) {
        const auto scan = plans.find("Seq Scan on " + table + " ");  // (the empty header table is scanned)
        BOOST_TEST(scan == std::string::npos,
                   "a sequential scan of " << table << ":\n" << plans.substr(plans.rfind("plan:", scan) - 100, 1500));
    }
}

BOOST_AUTO_TEST_SUITE_END()
