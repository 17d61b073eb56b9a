#pragma once
// seqinbox::postgresql::inbox: the inbox on the PostgreSQL store, with a source and an error sink
// of your choice (seqinbox::kafka's, or your own).
#include "seqinbox/inbox.hpp"
#include "seqinbox/policies.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::postgresql {

template <class Source, class ErrorSink, class Policies = default_policies>
using inbox = seqinbox::basic_inbox<store, Source, ErrorSink, Policies>;

}  // namespace seqinbox::postgresql
