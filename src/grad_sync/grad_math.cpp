// Gradient norms, scaling, zeroing and byte counts shared by the strategies.

#include "grad_sync/grad_math.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "mpiaccel/comm.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {

namespace {

// The defined gradients of `params`, for one multi-tensor op over all of them.
std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  grads.reserve(params.size());
  for (const at::Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad().detach());
  return grads;
}

}  // namespace

double local_grad_norm(const std::vector<at::Tensor>& params) {
  const std::vector<at::Tensor> grads = defined_grads(params);
  if (grads.empty()) return 0.0;
  // One multi-tensor pass for the norms (torch.nn.utils.clip_grad_norm_'s),
  // one host sync for all parameters.
  return at::stack(at::_foreach_norm(grads)).to(at::kDouble).norm().item<double>();
}

double sharded_grad_norm(Communicator& comm, const std::vector<at::Tensor>& shard_grads,
                         int replicas) {
  // Each shard's norm accumulated in double by the reduction itself: casting
  // the shard to double first made two shard-sized double temporaries (on a
  // 48M-parameter GPT at np 2, 158 ms against 22 ms for the whole sum).
  std::vector<at::Tensor> norms;
  for (const at::Tensor& g : shard_grads)
    if (g.defined()) norms.push_back(at::linalg_vector_norm(g.detach(), 2, c10::nullopt, false, at::kDouble));
  // One host sync for all shards; a rank without any still joins the sum.
  const double local = norms.empty() ? 0.0 : at::stack(norms).square().sum().item<double>();
  return std::sqrt(comm.all_reduce_scalar(local, ReduceOp::Sum) / replicas);
}

void scale_local_grads(const std::vector<at::Tensor>& params, double factor) {
  const std::vector<at::Tensor> grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, factor);
}

void zero_local_grads(const std::vector<at::Tensor>& params) {
  const std::vector<at::Tensor> grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_zero_(grads);
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
