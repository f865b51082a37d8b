// Local gradient norm / scaling / zeroing for replicated strategies.

#include "state/replicated_grads.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cmath>

#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {

double local_grad_norm(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : params) {
    const at::Tensor& g = p.grad();
    if (g.defined()) norms.push_back(g.detach().norm().to(at::kDouble));
  }
  if (norms.empty()) return 0.0;
  // One host sync for all parameters.
  return at::stack(norms).norm().item<double>();
}

void scale_local_grads(const std::vector<at::Tensor>& params, double factor) {
  for (const at::Tensor& p : params) {
    const at::Tensor& g = p.grad();
    if (g.defined()) g.detach().mul_(factor);
  }
}

void zero_local_grads(const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) {
    const at::Tensor& g = p.grad();
    if (g.defined()) g.detach().zero_();
  }
}

void reset_local_grads(const std::vector<at::Tensor>& params) {
  if (!kZeroGradSetsToNone) return zero_local_grads(params);
  for (const at::Tensor& p : params) p.mutable_grad() = at::Tensor();
}

int64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors)
    if (t.defined()) bytes += t.numel() * t.element_size();
  return bytes;
}

int64_t grad_bytes(const std::vector<at::Tensor>& params) {
  int64_t bytes = 0;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
  return bytes;
}

}  // namespace mpiaccel::detail
