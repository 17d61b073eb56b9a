#pragma once
// The policy bundle of basic_inbox: one member type per policy past the store, source and error
// sink. Override one by deriving and redeclaring only that member:
//
//   struct my_policies : seqinbox::default_policies {
//       using logger = seqinbox::logger::stream_logger;
//   };
//
// Write the right-hand side fully qualified: inside a struct in namespace seqinbox,
// `using propagation = propagation::required;` would change what `propagation` means there.
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/decoder/header_decoder.hpp"
#include "seqinbox/logger/null_logger.hpp"
#include "seqinbox/metrics/null_metrics.hpp"
#include "seqinbox/propagation/not_supported.hpp"

namespace seqinbox {

struct default_policies {
    using claim = ::seqinbox::claim::insert_first;
    using propagation = ::seqinbox::propagation::not_supported;
    using decoder = ::seqinbox::decoder::header_decoder;
    using clock = ::seqinbox::clock::system_clock;
    using metrics = ::seqinbox::metrics::null_metrics;
    using logger = ::seqinbox::logger::null_logger;
};

}  // namespace seqinbox
