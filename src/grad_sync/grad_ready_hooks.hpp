#pragma once
// The hook every gradient-communicating strategy (DDP, ZeRO-2, FSDP) hangs on
// its parameters: a post hook on each parameter's gradient accumulator, which
// autograd runs once the gradient has been accumulated into param.grad.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace mpiaccel::detail {

class GradReadyHooks {
 public:
  /// Calls `on_ready(i)` whenever the gradient of `params[i]` is ready.
  /// `owner` names the strategy in errors ("DDP reducer").
  GradReadyHooks(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                 const std::string& owner, std::function<void(size_t)> on_ready);
  /// Removes the hooks. Never throws.
  ~GradReadyHooks();
  GradReadyHooks(const GradReadyHooks&) = delete;
  GradReadyHooks& operator=(const GradReadyHooks&) = delete;

 private:
  // A parameter holds its accumulator only weakly: keep each alive, or the
  // hook would vanish with an accumulator rebuilt on the next forward.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> keys_;
};

}  // namespace mpiaccel::detail
