#pragma once
// The fixture contract of the conformance suite (tests/conformance/behaviour.hpp).
//
// The suite is written once; each backend instantiates it with a fixture type B that models
// `seqinbox::conformance::backend` below. A fixture object is created per test case and must give
// that test a fresh, empty store (PostgreSQL: a fresh schema or truncated tables). It provides:
//
//   using store_type = ...;                    the Store policy (models seqinbox::store_policy; its
//                                              transaction row_inserting_transaction, below)
//   store_type store;                          fresh per fixture object
// and derives from fixture_parts<store_type> (below) for the rest: the in-memory source and
// error sink (they work with every backend), a manual clock whose copies share the time (the
// inbox gets a copy), and the `inbox_type<Claim, Propagation>` alias;
//
// and inspection of COMMITTED state, as a separate connection would see it:
//   messages_with_key(key) -> std::vector<message_record>   every row with the claim key, by id
//   has_claim(key) -> bool                                   a committed claim row exists
//   claim_count() -> std::size_t                             committed claim rows
//   messages() -> std::vector<message_record>                every sequenced message row, by id
//   instances() -> std::vector<sequence_instance>            every sequence instance, by id
//   find_instance(sequence, context_id) -> std::optional<sequence_instance>
//
// and a business table beside the inbox tables (a key-value table in the same database), so a
// listener can write in `ctx.transaction` and a test can check what was committed:
//   business_put(transaction&, key, value)                   write inside that transaction
//   business_get(key) -> std::optional<std::string>          committed value, outside any tx
//   transaction_id(transaction&) -> std::uint64_t            identifies the database transaction
//                                                            (memory: tx.id(); PostgreSQL: txid_current())
// These may be static or non-static members.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "seqinbox/claim/check_then_insert.hpp"
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/manual_clock.hpp"
#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/housekeeper.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/propagation/not_supported.hpp"
#include "seqinbox/propagation/required.hpp"
#include "seqinbox/propagation/requires_new.hpp"
#include "seqinbox/store/concept.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox {

/// So that BOOST_TEST prints the outcomes it compares.
inline std::ostream& operator<<(std::ostream& out, request_outcome o) { return out << to_string(o); }

}  // namespace seqinbox

namespace seqinbox::conformance {

template <class Claim, class Propagation>
struct fixture_policies : default_policies {
    using claim = Claim;
    using propagation = Propagation;
    using clock = ::seqinbox::clock::manual_clock;
};

/// The parts every fixture shares whatever its store: source, error sink, clock, inbox type.
template <class Store>
struct fixture_parts {
    memory::source source;
    memory::error_sink error_sink;
    clock::manual_clock clock;

    template <class Claim = claim::insert_first, class Propagation = propagation::not_supported>
    using inbox_type = seqinbox::basic_inbox<Store, memory::source, memory::error_sink, fixture_policies<Claim, Propagation>>;
};

/// Test support beyond the store contract: the suite sets rows up as they are, through
/// `insert_message(row)` (deferred like any write whose result is not read). The engine never
/// needs it: it stores rows through store_message.
template <class T>
concept row_inserting_transaction = requires(T& tx, const message_record& row) { tx.insert_message(row); };

template <class B>
concept backend =
    std::default_initializable<B> && seqinbox::store_policy<typename B::store_type> &&
    row_inserting_transaction<typename B::store_type::transaction> &&
    requires(B& b, const claim_key& key, typename B::store_type::transaction& tx, const std::string& text) {
        requires std::same_as<decltype(b.store), typename B::store_type>;
        requires std::same_as<decltype(b.source), memory::source>;
        requires std::same_as<decltype(b.error_sink), memory::error_sink>;
        requires std::same_as<decltype(b.clock), clock::manual_clock>;
        typename B::template inbox_type<>;
        typename B::template inbox_type<claim::insert_first, propagation::required>;
        typename B::template inbox_type<claim::check_then_insert, propagation::requires_new>;
        { b.messages_with_key(key) } -> std::same_as<std::vector<message_record>>;
        { b.has_claim(key) } -> std::same_as<bool>;
        { b.claim_count() } -> std::convertible_to<std::size_t>;
        { b.messages() } -> std::same_as<std::vector<message_record>>;
        { b.instances() } -> std::same_as<std::vector<sequence_instance>>;
        { b.find_instance(text, text) } -> std::same_as<std::optional<sequence_instance>>;
        b.business_put(tx, text, text);
        { b.business_get(text) } -> std::same_as<std::optional<std::string>>;
        { b.transaction_id(tx) } -> std::convertible_to<std::uint64_t>;
    };

}  // namespace seqinbox::conformance
