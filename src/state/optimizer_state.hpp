#pragma once
// The per-parameter state of LibTorch's optimizers as named tensors, so
// strategies can describe it in a ShardedStateDict and the checkpoint can fill
// it back. LibTorch 1.13 keys Optimizer::state() by the parameter's TensorImpl
// address (c10::guts::to_string(param.unsafeGetTensorImpl())) and creates an
// entry lazily on the first step() that sees a gradient.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

/// The torch::optim class of an optimizer whose state we describe (ours
/// derive from AdamW and SGD); throws mpiaccel::Error for other optimizers.
enum class OptimizerType { AdamW, Adam, Sgd };
OptimizerType optimizer_type(const torch::optim::Optimizer& optimizer);
/// Its name in checkpoints' attributes: "adamw", "adam" or "sgd".
std::string optimizer_kind(const torch::optim::Optimizer& optimizer);

struct OptimizerSlot {
  std::string name;  ///< "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"
  at::Tensor tensor; ///< the optimizer's own tensor (writing it changes the state)
};

/// The slots the optimizer holds for `param`: Adam/AdamW exp_avg, exp_avg_sq
/// (+ max_exp_avg_sq with amsgrad); SGD momentum_buffer (only with momentum).
/// Empty while the optimizer has no state for `param` (before its first step),
/// unless `create_missing`: then the state is created as a fresh one (zeros,
/// step 0). For Adam/AdamW that is exactly what step() would create; for SGD
/// it is a zero momentum buffer, equivalent to step()'s clone of the first
/// gradient only when dampening is 0.
std::vector<OptimizerSlot> optimizer_slots(torch::optim::Optimizer& optimizer,
                                           const at::Tensor& param, bool create_missing = false);

/// Adam/AdamW's per-parameter step count (0 without state, and for SGD).
int64_t optimizer_param_step(const torch::optim::Optimizer& optimizer, const at::Tensor& param);
/// Sets it (creating the state if needed); no-op for SGD.
void set_optimizer_param_step(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                              int64_t step);
/// The largest per-parameter step: the number of optimizer steps taken.
int64_t optimizer_step(const torch::optim::Optimizer& optimizer);

/// Hyperparameters as text attributes ("optimizer" = kind,
/// "optimizer.group0.lr", ...), identical on every rank.
std::map<std::string, std::string> optimizer_attributes(const torch::optim::Optimizer& optimizer);

/// Bytes of all optimizer state tensors.
int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace mpiaccel
