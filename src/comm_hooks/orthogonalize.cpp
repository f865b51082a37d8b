#include "comm_hooks/orthogonalize.hpp"

#include <ATen/ATen.h>

#include <limits>

namespace mpiaccel::detail {

void orthogonalize_columns(at::Tensor& matrix, double epsilon) {
  const int64_t columns = matrix.size(1);
  for (int64_t i = 0; i < columns; ++i) {
    at::Tensor column = matrix.narrow(1, i, 1);
    // No host read of the norm (on a GPU each would wait for the device): a
    // zero column divided by the smallest normal number stays zero.
    column.div_(column.norm().add_(epsilon).clamp_min_(std::numeric_limits<float>::min()));
    if (i + 1 == columns) break;
    at::Tensor rest = matrix.narrow(1, i + 1, columns - i - 1);
    rest.sub_((column * rest).sum(0, /*keepdim=*/true) * column);
  }
}

}  // namespace mpiaccel::detail
