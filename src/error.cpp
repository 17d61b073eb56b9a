// The one exception type of seqinbox (see seqinbox/error.hpp).
#include "seqinbox/error.hpp"

#include <exception>

namespace seqinbox {

std::string error::join(const std::string& summary, const std::vector<std::string>& details) {
    std::string text = summary;
    for (const auto& d : details) text += "\n  - " + d;
    return text;
}

std::string current_exception_text() {
    try {
        throw;
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        return "an exception that is not a std::exception";
    }
}

}  // namespace seqinbox
