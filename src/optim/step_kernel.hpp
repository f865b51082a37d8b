#pragma once
// Which kernel steps an optimizer's parameters: the one place that decides it
// by device, dtype and LibTorch version (mpiaccel/optim.hpp says what each is).

#include <torch/optim/optimizer.h>

#include <vector>

namespace mpiaccel::detail {

enum class StepKernel {
  Host,       // host_adamw_step: contiguous float32 CPU tensors (AdamW only)
  Fused,      // LibTorch's at::_fused_adamw_ / at::_fused_sgd_
  Reference,  // torch::optim's own step
};

enum class OptimizerKind { AdamW, SGD };

/// The kernel for one step of `groups`, from the parameters that have a
/// gradient (Reference when none has).
StepKernel choose_step_kernel(OptimizerKind kind,
                              const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// Runs `closure` (if any) with gradients enabled, as torch::optim's steps do,
/// and returns its loss.
at::Tensor run_closure(const torch::optim::Optimizer::LossClosure& closure);

}  // namespace mpiaccel::detail
