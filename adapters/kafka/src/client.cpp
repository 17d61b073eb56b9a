#include "client.hpp"

#include <array>
#include <string>

#include "seqinbox/error.hpp"

namespace seqinbox::kafka::detail {

void set_property(rd_kafka_conf_t& conf, const std::string& name, const std::string& value, std::string_view role) {
    std::array<char, 512> reason{};
    if (rd_kafka_conf_set(&conf, name.c_str(), value.c_str(), reason.data(), reason.size()) != RD_KAFKA_CONF_OK)
        throw error(error_category::configuration, std::string(role) + ": librdkafka property '" + name + "' = '" + value +
                                                       "' refused: " + reason.data());
}

conf_ptr make_conf(const properties& props, std::string_view role) {
    conf_ptr conf(rd_kafka_conf_new());
    for (const auto& [name, value] : props) set_property(*conf, name, value, role);
    return conf;
}

std::string property_or(const properties& props, const std::string& name, std::string_view fallback) {
    const auto it = props.find(name);
    return it == props.end() ? std::string(fallback) : it->second;
}

rd_kafka_t* make_client(rd_kafka_type_t type, conf_ptr conf, std::string_view role) {
    std::array<char, 512> reason{};
    // rd_kafka_new takes the configuration only when it succeeds
    rd_kafka_t* client = rd_kafka_new(type, conf.get(), reason.data(), reason.size());
    if (!client) throw error(error_category::configuration, "cannot create the " + std::string(role) + ": " + reason.data());
    conf.release();
    return client;
}

namespace {

bool transient(rd_kafka_resp_err_t err) {
    switch (err) {
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
        return true;
    default:
        return false;
    }
}

}  // namespace

std::string error_text(rd_kafka_resp_err_t err, std::string_view doing) {
    return std::string(doing) + ": " + rd_kafka_err2name(err) + " (" + rd_kafka_err2str(err) + ")";
}

void throw_error(rd_kafka_resp_err_t err, std::string_view doing) {
    throw error(transient(err) ? error_category::retryable : error_category::configuration, error_text(err, doing));
}

std::vector<header> headers_of(const rd_kafka_message_t& message) {
    std::vector<header> result;
    rd_kafka_headers_t* headers = nullptr;  // owned by the message
    if (rd_kafka_message_headers(&message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return result;
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    for (std::size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
        result.push_back({name, value ? std::string(static_cast<const char*>(value), size) : std::string()});
    return result;
}

headers_ptr to_kafka_headers(const std::vector<header>& headers) {
    headers_ptr result(rd_kafka_headers_new(headers.size()));
    for (const auto& h : headers)
        rd_kafka_header_add(result.get(), h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                            static_cast<ssize_t>(h.value.size()));
    return result;
}

}  // namespace seqinbox::kafka::detail
