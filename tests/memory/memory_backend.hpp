#pragma once
// The conformance fixture (tests/conformance/backend.hpp) for the in-memory backend.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conformance/backend.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/memory/testing.hpp"

namespace seqinbox::conformance {

struct memory_backend : fixture_parts<memory::store> {
    using store_type = memory::store;

    memory_backend() = default;  // not an aggregate: memory::store's default constructor is explicit

    store_type store;

    std::vector<message_record> messages_with_key(const claim_key& key) const { return store.messages_with_key(key); }
    bool has_claim(const claim_key& key) const { return memory::testing::has_claim(store, key); }
    std::size_t claim_count() const { return store.claim_count(); }
    std::vector<message_record> messages() const { return store.messages(); }
    std::vector<sequence_instance> instances() const { return store.instances(); }
    std::optional<sequence_instance> find_instance(const std::string& sequence, const std::string& context_id) const {
        return store.find_instance(sequence, context_id);
    }

    static void business_put(store_type::transaction& tx, const std::string& key, const std::string& value) {
        tx.put(key, value);
    }
    std::optional<std::string> business_get(const std::string& key) const { return memory::testing::kv_get(store, key); }
    static std::uint64_t transaction_id(const store_type::transaction& tx) { return tx.id(); }
};

static_assert(backend<memory_backend>, "memory_backend must model the conformance fixture contract");

}  // namespace seqinbox::conformance
