// The test fixture itself: a server accepts connections while its pg_server lives and is gone,
// directory included, afterwards; a server left by a killed test process is removed by the next
// pg_server.
#define BOOST_TEST_MODULE seqinbox postgresql test server
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "pg_test_support.hpp"

using seqinbox::test::pg_server;

namespace {

pid_t postmaster_pid(const std::filesystem::path& dir) {
    std::ifstream in(dir / "data" / "postmaster.pid");
    pid_t pid = 0;
    in >> pid;
    return pid;
}

}  // namespace

BOOST_AUTO_TEST_CASE(server_is_removed_with_its_fixture) {
    std::filesystem::path dir;
    pid_t postmaster = 0;
    {
        pg_server server;
        dir = server.directory();
        postmaster = postmaster_pid(dir);
        BOOST_TEST(pg_server::alive(postmaster));
        soci::session s(soci::postgresql, server.create_database());
        BOOST_TEST(seqinbox::test::count(s, "SELECT 1") == 1);
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    BOOST_TEST(!pg_server::alive(postmaster));
}

BOOST_AUTO_TEST_CASE(server_of_a_killed_test_process_is_cleaned_up) {
    int channel[2];
    BOOST_REQUIRE(::pipe2(channel, O_CLOEXEC) == 0);  // the servers started by the child must not hold it
    const pid_t child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        // A test process that dies without running destructors.
        ::close(channel[0]);
        auto* server = new pg_server;
        const std::string dir = server->directory().string();
        if (::write(channel[1], dir.data(), dir.size()) != static_cast<ssize_t>(dir.size())) ::_exit(2);
        ::_exit(0);
    }
    ::close(channel[1]);
    std::string dir;
    char buffer[512];
    for (ssize_t n; (n = ::read(channel[0], buffer, sizeof buffer)) > 0;) dir.append(buffer, static_cast<std::size_t>(n));
    ::close(channel[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    BOOST_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    BOOST_REQUIRE(!dir.empty());
    const pid_t postmaster = postmaster_pid(dir);
    BOOST_REQUIRE(pg_server::alive(postmaster));  // left running by the dead test process

    pg_server next;  // cleans up before starting its own server
    BOOST_TEST(!std::filesystem::exists(dir));
    BOOST_TEST(!pg_server::alive(postmaster));
}
