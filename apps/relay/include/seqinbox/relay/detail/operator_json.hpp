#pragma once
// The operator API's JSON (docs/operator-api.md): the rows and views as documents, the request
// bodies and query parameters read with the offending value named. Used by operator_api.hpp.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqinbox/declare/numbering.hpp"
#include "seqinbox/relay/http_endpoint.hpp"
#include "seqinbox/store/actions.hpp"
#include "seqinbox/store/housekeeping.hpp"
#include "seqinbox/store/views.hpp"

namespace seqinbox::relay::detail {

using json = nlohmann::ordered_json;

/// A request the API cannot take: its status (400, 404, 405, 409) and why, naming the value.
class api_refusal : public std::runtime_error {
public:
    api_refusal(int status, const std::string& reason) : std::runtime_error(reason), status_(status) {}
    int status() const noexcept { return status_; }

private:
    int status_;
};

http_response json_response(int status, const json& body);
/// {"error": reason}
http_response error_response(int status, std::string_view reason);

json instance_json(const sequence_instance& i, timestamp now);
json message_json(const message_record& m, const std::optional<message_request>& pending, timestamp now);
/// The numbering a sequence is declared with; empty for a sequence declared unnumbered or unknown.
using declared_numbering = std::function<std::optional<numbering_rules>(const std::string& sequence)>;

/// {"last_released": N or null, "waiting": [N...], "missing": [[from, to]...]}, or null for an
/// unnumbered instance. With `declared`, the declarations say which sequences are numbered and
/// the missing numbers start at the declared first number when none was released; without,
/// an instance holding numbers is numbered and its missing numbers start at its first waiting one.
json numbering_json(const instance_view& v, const declared_numbering& declared);
/// {"instance", "pending_action", "message_counts": {STATE: N}, "messages": [the page], "next": cursor or null,
///  "numbering": numbering_json}
json instance_view_json(const instance_view& v, timestamp now, const declared_numbering& declared = {});
json message_view_json(const message_view& v, timestamp now);
json waiting_json(const std::vector<waiting_instance>& rows, timestamp now);
json counts_json(const std::vector<instance_count>& instances, const std::vector<message_count>& messages);
/// {"instances": [...], "next": cursor of the last row, or null when the page is not full}
json page_json(const std::vector<sequence_instance>& rows, std::size_t limit, timestamp now);

/// Query parameters, each absent or valid (api_refusal 400 otherwise).
std::size_t limit_parameter(const http_request& r);
/// `limit` from 1 to `most`, `otherwise` when absent.
std::size_t limit_parameter(const http_request& r, std::size_t otherwise, std::size_t most);
/// `limit` (up to max_message_page) and `after` (the `next` of the page before) of an instance's messages.
message_page message_page_parameters(const http_request& r);
scan_position after_parameter(const http_request& r);
double share_parameter(const http_request& r, double otherwise);
/// A positive id in a path segment (api_refusal 404 otherwise: no such resource).
std::int64_t id_segment(std::string_view segment, std::string_view what);
/// The parameters `names`, each required (api_refusal 400 naming the missing one).
std::vector<std::string> required_parameters(const http_request& r, std::initializer_list<std::string_view> names);

/// An action request: its target by id, or by two names (a key, or a sequence and context id).
template <class Action>
struct action_request {
    Action action;
    std::variant<std::int64_t, std::pair<std::string, std::string>> target;
};

/// {"action": CONSUME|EXPIRE, "id": N} or {"action": ..., "type": T, "idempotence_id": I}.
action_request<message_action> message_action_body(std::string_view body);
/// {"action": CONSUME_ALL|CLOSE|SKIP_GAP, "id": N} or {"action": ..., "sequence": S, "context_id": C}.
action_request<instance_action> instance_action_body(std::string_view body);

}  // namespace seqinbox::relay::detail
