#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "seqinbox/decoder/concept.hpp"
#include "seqinbox/detail/escaped_text.hpp"
#include "seqinbox/error.hpp"

namespace seqinbox::decoder {

/// Reads type and idempotence id from headers; the message is the record value as text (empty
/// for a null value). A header may repeat with the same value; repeated with different values
/// it makes the record undecodable, since no choice between them would be safe.
struct header_decoder {
    using message_type = std::string;

    std::string type_header = "message-type";
    std::string idempotence_header = "idempotence-id";

    decoded<std::string> decode(const envelope& e) const {
        return {required(e, type_header), required(e, idempotence_header), e.value.value_or(std::string())};
    }

private:
    static std::string required(const envelope& e, const std::string& name) {
        std::optional<std::string_view> found;
        for (const auto& h : e.headers) {
            if (h.name != name) continue;
            if (found && *found != h.value)
                throw error(error_category::bad_message, "conflicting headers '" + name + "': '" + detail::printable(*found) +
                                                             "' and '" + detail::printable(h.value) + "' in record " + where(e));
            found = h.value;
        }
        if (!found || found->empty())
            throw error(error_category::bad_message, "header '" + name + "' missing or empty in record " + where(e));
        return std::string(*found);
    }

    static std::string where(const envelope& e) {
        return e.topic + "/" + std::to_string(e.partition) + "@" + std::to_string(e.offset);
    }
};

}  // namespace seqinbox::decoder
