#pragma once
// librdkafka configuration, passed through verbatim: any property of librdkafka's
// CONFIGURATION.md (https://github.com/confluentinc/librdkafka/blob/v2.0.2/CONFIGURATION.md).
#include <map>
#include <string>

namespace seqinbox::kafka {

/// Property name -> value, e.g. {"bootstrap.servers", "broker:9092"}.
using properties = std::map<std::string, std::string>;

}  // namespace seqinbox::kafka
