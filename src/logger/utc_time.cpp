// Times as people and log tools read them (see seqinbox/logger/utc_time.hpp).
#include "seqinbox/logger/utc_time.hpp"

#include <cstdio>
#include <ctime>

namespace seqinbox::logger {

std::string utc_time(std::chrono::system_clock::time_point t) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
    const std::time_t seconds = std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(ms));
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char text[96];  // room for any int the fields could hold
    const auto millis = static_cast<int>((ms.time_since_epoch() % std::chrono::seconds(1)).count());
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                  parts.tm_hour, parts.tm_min, parts.tm_sec, (millis + 1000) % 1000);
    return text;
}

}  // namespace seqinbox::logger
