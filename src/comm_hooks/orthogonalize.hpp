#pragma once
// Gram-Schmidt orthonormalization of a matrix's columns, in place, as
// PowerSGD uses it (Vogels et al. 2019, Algorithm 1).

#include <ATen/core/Tensor.h>

namespace mpiaccel::detail {

/// Columns of `matrix` [rows, r] become orthonormal, left to right: each is
/// divided by its norm (plus `epsilon`), then its component is removed from
/// the columns right of it. A zero column stays zero.
void orthogonalize_columns(at::Tensor& matrix, double epsilon);

}  // namespace mpiaccel::detail
