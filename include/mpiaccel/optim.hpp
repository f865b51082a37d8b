#pragma once
// Optimizer steps of mpiaccel's own (src/optim; docs/data_and_models.md,
// "Optimizers"): the host AdamW that ZeRO-Offload steps its master copies with.

#include <ATen/core/Tensor.h>

#include <functional>

namespace torch::optim {
class AdamW;
}

namespace mpiaccel {

/// One step of `optimizer`, with exactly the arithmetic of
/// torch::optim::AdamW::step() (LibTorch 1.13) and the same state entries
/// (AdamWParamState step/exp_avg/exp_avg_sq/max_exp_avg_sq), but fused into one
/// vectorised pass per parameter and split over the intra-op threads
/// (at::set_num_threads). Parameters, gradients and state must be contiguous
/// float32 CPU tensors (ZeRO-Offload's master copies are). Bit-identical to
/// torch::optim::AdamW on CPUs with AVX2+FMA.
void host_adamw_step(torch::optim::AdamW& optimizer);

/// Called around each parameter's update by host_adamw_step: `before(p)` when
/// p is next (e.g. wait until its gradient has arrived from the device),
/// `after(p)` once p is updated (e.g. start its copy back), so the copies of
/// the others overlap the host arithmetic. Either may be empty.
struct HostStepHooks {
  std::function<void(const at::Tensor&)> before;
  std::function<void(const at::Tensor&)> after;
};
/// host_adamw_step with `hooks` around each parameter that has a gradient.
void host_adamw_step(torch::optim::AdamW& optimizer, const HostStepHooks& hooks);

}  // namespace mpiaccel
