// The step kernel of mpiaccel::AdamW and mpiaccel::SGD (see step_kernel.hpp).

#include "optim/step_kernel.hpp"

#include <ATen/core/grad_mode.h>

#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {
namespace {

// The LibTorch releases whose fused kernels cover each case.
constexpr bool kFusedAdamwCuda = MPIACCEL_TORCH_AT_LEAST(2, 1);
constexpr bool kFusedAdamwCpu = MPIACCEL_TORCH_AT_LEAST(2, 4);
constexpr bool kFusedSgd = MPIACCEL_TORCH_AT_LEAST(2, 4);  // CPU and CUDA

// What the parameters with a gradient have in common.
struct Census {
  bool any = false;
  bool all_dense = true;      // dense, contiguous, floating, gradient of its dtype and device
  bool one_place = true;      // one device and one dtype for all
  bool cpu = false, cuda = false;
  bool float32 = false;
};

bool dense_pair(const at::Tensor& p, const at::Tensor& g) {
  return p.is_floating_point() && p.is_contiguous() && !p.is_sparse() && !g.is_sparse() &&
         g.is_contiguous() && g.scalar_type() == p.scalar_type() && g.device() == p.device() &&
         g.numel() == p.numel();
}

Census census_of(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  Census c;
  at::Tensor first;
  for (const auto& group : groups)
    for (const at::Tensor& p : group.params()) {
      const at::Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (!first.defined()) first = p;
      c.any = true;
      c.all_dense = c.all_dense && dense_pair(p, g);
      c.one_place = c.one_place && p.device() == first.device() && p.scalar_type() == first.scalar_type();
    }
  if (c.any) {
    c.cpu = first.is_cpu();
    c.cuda = first.is_cuda();
    c.float32 = first.scalar_type() == at::kFloat;
  }
  return c;
}

}  // namespace

StepKernel choose_step_kernel(OptimizerKind kind,
                              const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  const Census c = census_of(groups);
  if (!c.any || !c.all_dense || !c.one_place) return StepKernel::Reference;
  if (kind == OptimizerKind::AdamW) {
    if (c.cpu && c.float32) return StepKernel::Host;
    if ((c.cuda && kFusedAdamwCuda) || (c.cpu && kFusedAdamwCpu)) return StepKernel::Fused;
    return StepKernel::Reference;
  }
  return (c.cpu || c.cuda) && kFusedSgd ? StepKernel::Fused : StepKernel::Reference;
}

at::Tensor run_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace mpiaccel::detail
