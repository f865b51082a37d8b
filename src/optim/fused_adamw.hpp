#pragma once
// AdamW that steps CUDA parameters with LibTorch's fused multi-tensor kernel
// (at::_fused_adamw_, LibTorch 2.x: one launch per parameter group instead of
// about eight element-wise kernels per parameter), and everything else with
// torch::optim::AdamW's own step. It is a torch::optim::AdamW with the same
// options and per-parameter state (step, exp_avg, exp_avg_sq,
// max_exp_avg_sq), so checkpoints, ZeRO's host AdamW and the strategies see
// no difference.

#include <torch/optim/adamw.h>

#include <cstdint>
#include <unordered_map>
#include <utility>

namespace mpiaccel::detail {

class FusedAdamW final : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override;

  /// Whether this LibTorch has the fused kernel at all.
  static bool available();

 private:
  /// Every parameter with a gradient is a dense, contiguous floating CUDA
  /// tensor with a gradient of its own dtype.
  bool fused_applies() const;
  void fused_step(torch::optim::OptimizerParamGroup& group);
  /// The parameter's step count as a device float tensor (the kernel's
  /// input), kept in step with its AdamWParamState.
  at::Tensor device_step(const at::Tensor& param, int64_t step);

  std::unordered_map<const void*, std::pair<int64_t, at::Tensor>> device_steps_;
};

}  // namespace mpiaccel::detail
