// The catalog of messages decoded as text, the one every in-tree program and most users
// instantiate: compiled here once (see the extern template in seqinbox/detail/catalog.hpp).
#include "seqinbox/detail/catalog.hpp"

namespace seqinbox::detail {

template class catalog<std::string>;

}  // namespace seqinbox::detail
