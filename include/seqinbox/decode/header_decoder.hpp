#pragma once
#include <string>

#include "seqinbox/decode/concept.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::decode {

/// Reads type and idempotence id from headers; the message is the record value as text.
struct header_decoder {
    using message_type = std::string;

    std::string type_header = "message-type";
    std::string idempotence_header = "idempotence-id";

    decoded<std::string> decode(const envelope& e) const {
        return {required(e, type_header), required(e, idempotence_header), e.value.value_or(std::string())};
    }

private:
    static std::string required(const envelope& e, const std::string& name) {
        auto value = e.find_header(name);
        if (!value || value->empty())
            throw error(error_category::bad_message,
                        "header '" + name + "' missing or empty in record " + e.topic + "/" +
                            std::to_string(e.partition) + "@" + std::to_string(e.offset));
        return std::string(*value);
    }
};

}  // namespace seqinbox::decode
