// mpiaccel::AdamW (see mpiaccel/optim.hpp): the kernel step_kernel.cpp picks.

#include "mpiaccel/optim.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <vector>

#include "mpiaccel/error.hpp"
#include "optim/adamw_state.hpp"
#include "optim/step_kernel.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel {

torch::Tensor AdamW::step(LossClosure closure) {
  const auto kernel = detail::choose_step_kernel(detail::OptimizerKind::AdamW, param_groups());
  if (kernel == detail::StepKernel::Reference) return torch::optim::AdamW::step(std::move(closure));
  at::Tensor loss = detail::run_closure(closure);
  if (kernel == detail::StepKernel::Host) {
    host_adamw_step(*this);
  } else {
    at::NoGradGuard no_grad;
    for (auto& group : param_groups()) fused_step(group);
  }
  return loss;
}

at::Tensor AdamW::device_step(const at::Tensor& param, int64_t step) {
  auto& [count, tensor] = device_steps_[param.unsafeGetTensorImpl()];
  // Out of step (first use, or a checkpoint restored the state): set anew.
  if (!tensor.defined() || count != step - 1)
    tensor = at::full({}, static_cast<double>(step - 1), param.options().dtype(at::kFloat));
  count = step;
  return tensor;
}

#if MPIACCEL_TORCH_AT_LEAST(2, 1)

void AdamW::fused_step(torch::optim::OptimizerParamGroup& group) {
  const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  for (const at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& state = detail::adamw_state_of(*this, p, options.amsgrad());
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

void AdamW::fused_step(torch::optim::OptimizerParamGroup&) {
  MPIACCEL_THROW("mpiaccel::AdamW: this LibTorch has no fused AdamW kernel");
}

#endif

}  // namespace mpiaccel
