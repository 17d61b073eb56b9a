// The PostgreSQL store's transaction (its state in transaction_impl.hpp): its life, the writes it
// defers as they come (state changes, closings, clearing actions), savepoints, commit, rollback.
#include <cstdint>
#include <memory>
#include <utility>

#include "seqinbox/postgresql/store.hpp"
#include "store_parts.hpp"
#include "transaction_impl.hpp"

namespace seqinbox::postgresql {

namespace {

using detail::actions_clearing;
using detail::checked;
using detail::instance_closing;
using detail::state_change;

}  // namespace

store::transaction::transaction(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
store::transaction::transaction(transaction&&) noexcept = default;
store::transaction& store::transaction::operator=(transaction&&) noexcept = default;
store::transaction::~transaction() = default;

void store::transaction::update_message_state(message_id id, message_state state, timestamp now) {
    checked(impl_).defer(state_change{id, state, now});
}

void store::transaction::close_instance(instance_id instance, timestamp now) {
    checked(impl_).defer(instance_closing{instance, now});
}

void store::transaction::clear_actions(instance_id instance, const seqinbox::pending_actions& read) {
    checked(impl_).defer(actions_clearing{instance, read});
}

store::savepoint_id store::transaction::savepoint() { return checked(impl_).savepoint(); }
void store::transaction::rollback_to(savepoint_id point) { checked(impl_).rollback_to(point); }
void store::transaction::release(savepoint_id point) { checked(impl_).release(point); }
void store::transaction::commit() { checked(impl_).commit(); }
void store::transaction::rollback() { checked(impl_).rollback(); }
soci::session& store::transaction::session() { return checked(impl_).session(); }
bool store::transaction::active() const noexcept { return impl_ && impl_->active(); }
bool store::transaction::aborted() const noexcept { return impl_ && impl_->aborted(); }

std::uint64_t store::transaction::id() {
    return static_cast<std::uint64_t>(checked(impl_).read("reading txid_current()", [](detail::connection& c) {
        auto& s = c.statement<detail::transaction_id_query>();
        s.st.execute(true);
        return s.id;
    }));
}

}  // namespace seqinbox::postgresql
