// FusedAdamW (see fused_adamw.hpp).

#include "optim/fused_adamw.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <memory>
#include <vector>

#include "mpiaccel/error.hpp"
#include "runtime/torch_compat.hpp"
#include "optim/adamw_state.hpp"

namespace mpiaccel::detail {

torch::Tensor FusedAdamW::step(LossClosure closure) {
  if (!available() || !fused_applies()) return torch::optim::AdamW::step(std::move(closure));
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  at::NoGradGuard no_grad;
  for (auto& group : param_groups()) fused_step(group);
  return loss;
}

bool FusedAdamW::fused_applies() const {
  bool any = false;
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params()) {
      const at::Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (!p.is_cuda() || !p.is_floating_point() || !p.is_contiguous() || g.is_sparse() ||
          g.scalar_type() != p.scalar_type() || g.device() != p.device() || !g.is_contiguous())
        return false;
      any = true;
    }
  return any;
}

at::Tensor FusedAdamW::device_step(const at::Tensor& param, int64_t step) {
  auto& [count, tensor] = device_steps_[param.unsafeGetTensorImpl()];
  // Out of step (first use, or a checkpoint restored the state): set anew.
  if (!tensor.defined() || count != step - 1)
    tensor = at::full({}, static_cast<double>(step - 1), param.options().dtype(at::kFloat));
  count = step;
  return tensor;
}

#if MPIACCEL_TORCH_AT_LEAST(2, 1)

bool FusedAdamW::available() { return true; }

void FusedAdamW::fused_step(torch::optim::OptimizerParamGroup& group) {
  const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  for (const at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& state = adamw_state_of(*this, p, options.amsgrad());
    state.step(state.step() + 1);
    params.push_back(p);
    grads.push_back(p.grad());
    exp_avgs.push_back(state.exp_avg());
    exp_avg_sqs.push_back(state.exp_avg_sq());
    if (options.amsgrad()) max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
    steps.push_back(device_step(p, state.step()));
  }
  if (params.empty()) return;
  // The kernel reads the count after this step, as torch.optim.AdamW(fused=True)
  // increments it first: one multi-tensor add for the whole group.
  at::_foreach_add_(steps, 1.0);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, options.lr(),
                    std::get<0>(options.betas()), std::get<1>(options.betas()),
                    options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false);
}

#else

bool FusedAdamW::available() { return false; }

void FusedAdamW::fused_step(torch::optim::OptimizerParamGroup&) {
  MPIACCEL_THROW("FusedAdamW: this LibTorch has no fused AdamW kernel");
}

#endif

}  // namespace mpiaccel::detail
