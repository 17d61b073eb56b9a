#pragma once
// Lets BOOST_TEST print a record's key or value (std::optional<std::string>): `null` or the
// quoted bytes, so a failure shows which of null and empty came out.
#include <optional>
#include <ostream>
#include <string>

#include <boost/test/unit_test.hpp>

template <>
struct boost::test_tools::tt_detail::print_log_value<std::optional<std::string>> {
    void operator()(std::ostream& out, const std::optional<std::string>& bytes) const {
        if (bytes)
            out << '"' << *bytes << '"';
        else
            out << "null";
    }
};
