#pragma once
// Deciding a batch of deliveries in one transaction (basic_inbox::deliver_batch, poll_batch).
//
// The outcome of every record is the one that delivering the records one after another, in the
// given order, would give: duplicates within the batch, a successor and its predecessor in the
// same batch (released within it), several contexts, listener failures. All inbox state the
// batch writes commits together: one transaction and one WAL flush per batch — or per part, when
// the batch is larger than the store's max_batch_records (what the server's lock table holds):
// the parts are decided one after another, each in its own transaction.
//
// The at-least-once window is the batch: when the batch does not commit (a lost connection, a
// crash, a before_commit hook that throws), the listeners that ran for it, joined to the
// transaction or not, may run again when it is redelivered; under propagation::required their
// writes to the transaction rolled back with it.
#include <cstddef>
#include <functional>

namespace seqinbox {

/// What the caller of deliver_batch can hook into the batch.
struct batch_hooks {
    /// Runs after every listener of the batch ran and before the batch commits, on the calling
    /// thread. A throw rolls the batch back: nothing of it is stored, the error sink hears
    /// nothing more (only of released messages that failed, which it hears at once), and
    /// deliver_batch rethrows, so that the whole batch is delivered again (the
    /// relay waits here for the broker acknowledgements of everything its listeners produced).
    std::function<void()> before_commit;
};

}  // namespace seqinbox
