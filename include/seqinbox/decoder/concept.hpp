#pragma once
// The decoder policy: turns raw bytes into the message listeners read, and names its type and
// idempotence id. Called again on the stored bytes when a buffered message is replayed.
#include <concepts>
#include <string>

#include "seqinbox/envelope.hpp"

namespace seqinbox {

template <class Message>
struct decoded {
    std::string type;
    std::string idempotence_id;
    Message message;
};

/// `decode(e)` throws seqinbox::error(bad_message) when `e` cannot be decoded.
template <class D>
concept decoder_policy = requires(const D& d, const envelope& e) {
    typename D::message_type;
    { d.decode(e) } -> std::same_as<decoded<typename D::message_type>>;
};

}  // namespace seqinbox
