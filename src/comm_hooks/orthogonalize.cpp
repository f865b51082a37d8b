#include "comm_hooks/orthogonalize.hpp"

#include <ATen/ATen.h>

namespace mpiaccel::detail {

void orthogonalize_columns(at::Tensor& matrix, double epsilon) {
  const int64_t columns = matrix.size(1);
  for (int64_t i = 0; i < columns; ++i) {
    at::Tensor column = matrix.narrow(1, i, 1);
    const double norm = column.norm().item<double>();
    if (norm + epsilon > 0) column.div_(norm + epsilon);
    if (i + 1 == columns) break;
    at::Tensor rest = matrix.narrow(1, i + 1, columns - i - 1);
    rest.sub_((column * rest).sum(0, /*keepdim=*/true) * column);
  }
}

}  // namespace mpiaccel::detail
