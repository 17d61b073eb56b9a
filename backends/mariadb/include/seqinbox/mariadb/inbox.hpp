#pragma once
// seqinbox::mariadb::inbox: the inbox on the MariaDB store, with a source and an error sink of
// your choice (seqinbox::kafka's, or your own).
#include "seqinbox/inbox.hpp"
#include "seqinbox/mariadb/store.hpp"
#include "seqinbox/policies.hpp"

namespace seqinbox::mariadb {

template <class Source, class ErrorSink, class Policies = default_policies>
using inbox = seqinbox::basic_inbox<store, Source, ErrorSink, Policies>;

}  // namespace seqinbox::mariadb
