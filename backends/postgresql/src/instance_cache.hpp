#pragma once
// Private to seqinbox::postgresql: the instance cache every store shares (seqinbox/detail/instance_cache.hpp).
#include "seqinbox/detail/instance_cache.hpp"

namespace seqinbox::postgresql::detail {

using seqinbox::detail::instance_cache;

}  // namespace seqinbox::postgresql::detail
