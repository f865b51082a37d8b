#pragma once
// Gradient arithmetic shared by the replicated strategies (DDP, NoDist):
// every rank holds every (already averaged) gradient, so norms and scaling are
// local.

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "state/param_list.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

/// sqrt(sum of squared L2 norms) of the defined gradients, in double.
double local_grad_norm(const std::vector<at::Tensor>& params);
void scale_local_grads(const std::vector<at::Tensor>& params, double factor);
/// Zeroes defined gradients in place (never resets them to undefined, so
/// gradient bucket views stay bound).
void zero_local_grads(const std::vector<at::Tensor>& params);
/// What this LibTorch's Optimizer::zero_grad() does: undefined gradients in
/// 2.x, zeroed in place in 1.13 (runtime/torch_compat.hpp).
void reset_local_grads(const std::vector<at::Tensor>& params);
int64_t tensor_bytes(const std::vector<at::Tensor>& tensors);
int64_t grad_bytes(const std::vector<at::Tensor>& params);

}  // namespace mpiaccel::detail
