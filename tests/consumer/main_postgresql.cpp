// A program built against the INSTALLED seqinbox::postgresql (see run.cmake). It links only
// seqinbox::postgresql, so SOCI and libpq must come from the package's link interface. It needs
// no server: it checks that a connection string is redacted; when SEQINBOX_CONSUMER_CONNINFO names
// a database, it also migrates it and runs an empty transaction through a store.
#include <seqinbox/postgresql/migrate.hpp>
#include <seqinbox/postgresql/store.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

bool redacts_the_password() {
    seqinbox::postgresql::store_options options;
    options.conninfo = "host=db.example.org dbname=orders user=inbox password=s3cret";
    const std::string shown = seqinbox::postgresql::redact_conninfo(options.conninfo);
    return shown.find("s3cret") == std::string::npos && shown.find("db.example.org") != std::string::npos;
}

bool store_works(const std::string& conninfo) {
    seqinbox::postgresql::migrate(conninfo);
    seqinbox::postgresql::store_options options;
    options.conninfo = conninfo;
    seqinbox::postgresql::store store(options);
    auto transaction = store.begin();
    transaction.commit();
    return store.statistics().connections_opened >= 1;
}

}  // namespace

int main() {
    try {
        bool ok = redacts_the_password();
        if (const char* conninfo = std::getenv("SEQINBOX_CONSUMER_CONNINFO")) ok = ok && store_works(conninfo);
        std::puts(ok ? "seqinbox postgresql consumer: ok" : "seqinbox postgresql consumer: WRONG RESULT");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::printf("seqinbox postgresql consumer: %s\n", e.what());
        return 1;
    }
}
