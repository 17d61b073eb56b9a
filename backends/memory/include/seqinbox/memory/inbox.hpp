#pragma once
// seqinbox::memory::inbox: the inbox on the in-memory store, source and error sink.
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/policies.hpp"

namespace seqinbox::memory {

template <class Policies = default_policies>
using basic_inbox = seqinbox::basic_inbox<store, source, error_sink, Policies>;

/// The default combination: insert-first claim, listeners outside inbox transactions.
using inbox = basic_inbox<>;

}  // namespace seqinbox::memory
