#pragma once
// mpiaccel's optimizers (src/optim; docs/data_and_models.md, "Optimizers"):
// AdamW and SGD that are torch::optim::AdamW and torch::optim::SGD (the same
// options, per-parameter state and checkpoints) with a faster step, and the
// host AdamW kernel that ZeRO-Offload steps its master copies with.

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>

namespace mpiaccel {

/// torch::optim::AdamW with one fused pass per step instead of about eight
/// element-wise kernels per parameter. Which kernel runs is decided at each
/// step, in one place (src/optim/step_kernel.cpp), from the parameters that
/// have a gradient:
/// - all contiguous float32 CPU tensors: host_adamw_step, bit-identical to
///   torch::optim::AdamW;
/// - all dense floating tensors of one CUDA device and dtype (LibTorch >= 2.1),
///   or of the CPU in another floating dtype (LibTorch >= 2.4): LibTorch's
///   multi-tensor kernel at::_fused_adamw_, what torch.optim.AdamW(fused=True)
///   runs (equal to the reference within float rounding);
/// - anything else (sparse, mixed devices or dtypes, LibTorch 1.13 off the
///   float32 CPU path): torch::optim::AdamW::step itself.
class AdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  void fused_step(torch::optim::OptimizerParamGroup& group);
  /// The parameter's step count as a float tensor on its device (the fused
  /// kernel's input), kept in step with its AdamWParamState.
  at::Tensor device_step(const at::Tensor& param, int64_t step);

  std::unordered_map<const void*, std::pair<int64_t, at::Tensor>> device_steps_;
};

/// torch::optim::SGD (momentum, dampening, Nesterov, weight decay) stepped by
/// LibTorch's multi-tensor kernel at::_fused_sgd_ (LibTorch >= 2.4, CPU and
/// CUDA) when every parameter with a gradient is a dense floating tensor of
/// one device and dtype: one pass per parameter instead of three to five
/// kernels; torch::optim::SGD::step otherwise. Equal to the reference within
/// float rounding (fused multiply-adds).
class SGD : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  void fused_step(torch::optim::OptimizerParamGroup& group);
};

/// One step of `optimizer`, with exactly the arithmetic of
/// torch::optim::AdamW::step() and the same state entries (AdamWParamState
/// step/exp_avg/exp_avg_sq/max_exp_avg_sq), but fused into one vectorised
/// pass per parameter and split over the intra-op threads
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
