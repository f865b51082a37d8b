#pragma once
// Internal: the linear map tp::Linear computes with, deferring the weight's
// gradient while a DeferredWeightGrads records (tensor_parallel.hpp).

#include <ATen/core/Tensor.h>

namespace mpiaccel::tp::detail {

/// at::linear(x, weight, bias); while a DeferredWeightGrads::Recording is
/// alive on this thread (and gradients are on), a backward that keeps the
/// weight's gradient in that store.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace mpiaccel::tp::detail
