// Housekeeping job locks as leases: a row of seqinbox_job_lease (schema V9) per running job,
// taken, renewed and given back by one autocommitted statement each. Nothing is held between
// statements, so a transaction pooler may lend the server connection to others meanwhile.
#include <unistd.h>

#include <array>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pool.hpp"
#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"

namespace seqinbox::postgresql {

namespace {

/// Takes the job's lease when nobody holds it or its lease has expired (its holder died or
/// stalled): one row back when taken. Expiry is the server's clock, so the service instances'
/// clocks need not agree.
const detail::named_sql& lease_take_sql() {
    static const detail::named_sql s = detail::named(
        "job_lease_take",
        "INSERT INTO seqinbox_job_lease (job, holder, expires_at)"
        " VALUES ($1, $2, clock_timestamp() + CAST($3 AS bigint) * interval '1 millisecond')"
        " ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at"
        " WHERE seqinbox_job_lease.expires_at <= clock_timestamp() RETURNING 1");
    return s;
}

/// Extends the lease of its holder: one row affected while it still holds it.
const detail::named_sql& lease_renew_sql() {
    static const detail::named_sql s = detail::named(
        "job_lease_renew",
        "UPDATE seqinbox_job_lease SET expires_at = clock_timestamp() + CAST($3 AS bigint) * interval '1 millisecond'"
        " WHERE job = $1 AND holder = $2");
    return s;
}

/// Gives the lease back, unless another holder took it over after it expired.
const detail::named_sql& lease_release_sql() {
    static const detail::named_sql s = detail::named("job_lease_release", "DELETE FROM seqinbox_job_lease WHERE job = $1 AND holder = $2");
    return s;
}

/// Who holds a lease, for operators reading the table (host and process) and unique per taking.
std::string new_holder() {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    thread_local std::mt19937_64 random{std::random_device{}()};
    return std::string(host.data()) + ":" + std::to_string(::getpid()) + ":" + std::to_string(random());
}

}  // namespace

struct store::job_lock::impl {
    store* owner;
    std::string job;
    std::string holder;

    std::vector<detail::parameter> lease_params() const {
        return {job, holder, std::to_string(std::chrono::milliseconds(owner->options().job_lease).count())};
    }

    ~impl() {
        if (holder.empty()) return;
        try {
            owner->autocommitted_statement("giving back the lease of housekeeping job " + job, lease_release_sql(), {job, holder});
        } catch (...) {  // it expires
        }
    }
};

store::job_lock::job_lock() noexcept = default;
store::job_lock::job_lock(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
store::job_lock::job_lock(job_lock&&) noexcept = default;
store::job_lock& store::job_lock::operator=(job_lock&&) noexcept = default;
store::job_lock::~job_lock() = default;

bool store::job_lock::renew() {
    if (!impl_) return false;
    const auto renewed =
        impl_->owner->autocommitted_statement("renewing the lease of housekeeping job " + impl_->job, lease_renew_sql(), impl_->lease_params());
    if (renewed.affected() == 1) return true;
    impl_->holder.clear();  // another holds it now: nothing of ours to give back
    impl_.reset();
    return false;
}

store::job_lock store::try_lock_job(const std::string& job) {
    std::unique_ptr<job_lock::impl> state(new job_lock::impl{this, job, new_holder()});
    const auto taken = autocommitted_statement("taking the lease of housekeeping job " + job, lease_take_sql(), state->lease_params());
    if (taken.rows() == 1) return job_lock(std::move(state));
    state->holder.clear();
    return {};
}

}  // namespace seqinbox::postgresql
