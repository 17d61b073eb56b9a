#pragma once
// Part of basic_inbox's batches (seqinbox/detail/inbox_batch.hpp), apart so that the class can
// name it in what one delivery and a batch share (its scope, publish, forget).
#include <cstddef>
#include <set>
#include <vector>

#include "seqinbox/error.hpp"
#include "seqinbox/error_sink/concept.hpp"
#include "seqinbox/store/model.hpp"

namespace seqinbox::detail {

/// A full buffer rejected the batch's record `index` (overflow_policy::reject): poll_batch keeps
/// the records before it.
struct rejected_record : error {
    rejected_record(const error& e, std::size_t at) : error(e), index(at) {}
    std::size_t index;
};

/// What a batch defers to its commit, and which claims it deleted.
struct batch_effects {
    std::vector<failed_delivery> to_sink;  ///< the error sink hears once the batch committed
    std::set<claim_key> forgotten;
};

}  // namespace seqinbox::detail
