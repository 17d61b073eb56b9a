#pragma once
// seqinbox::memory::inbox: the inbox on the in-memory store, source and error sink.
#include "seqinbox/claim/insert_first.hpp"
#include "seqinbox/clock/system_clock.hpp"
#include "seqinbox/decode/header_decoder.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/log/null_logger.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/memory/store.hpp"
#include "seqinbox/metrics/null_metrics.hpp"
#include "seqinbox/propagation/not_supported.hpp"

namespace seqinbox::memory {

template <class Claim = claim::insert_first, class Propagation = propagation::not_supported,
          class Decoder = decode::header_decoder, class Clock = clocks::system_clock,
          class Metrics = metrics::null_metrics, class Logger = log::null_logger>
using basic_inbox = seqinbox::basic_inbox<store, source, error_sink, Claim, Propagation, Decoder, Clock, Metrics, Logger>;

/// The default combination: insert-first claim, listeners outside inbox transactions.
using inbox = basic_inbox<>;

}  // namespace seqinbox::memory
