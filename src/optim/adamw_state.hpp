#pragma once
// AdamW's per-parameter state, found or created exactly as
// torch::optim::AdamW::step creates it, for the steps that replace it
// (ZeRO's host AdamW, the fused CUDA AdamW): checkpoints and torch's own step
// then see the same entries.

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <memory>

#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {

inline torch::optim::AdamWParamState& adamw_state_of(torch::optim::AdamW& optimizer,
                                                     const at::Tensor& param, bool amsgrad) {
  const auto key = optimizer_state_key(optimizer, param);
  auto found = optimizer.state().find(key);
  if (found == optimizer.state().end()) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(0);
    state->exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
    state->exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    if (amsgrad) state->max_exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    found = optimizer.state().emplace(key, std::move(state)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*found->second);
}

}  // namespace mpiaccel::detail
