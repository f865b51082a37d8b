// mpiaccel::SGD (see mpiaccel/optim.hpp): LibTorch's fused kernel where
// step_kernel.cpp picks it, torch::optim::SGD's own step elsewhere.

#include "mpiaccel/optim.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <memory>
#include <vector>

#include "mpiaccel/error.hpp"
#include "optim/step_kernel.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel {

torch::Tensor SGD::step(LossClosure closure) {
  const auto kernel = detail::choose_step_kernel(detail::OptimizerKind::SGD, param_groups());
  if (kernel != detail::StepKernel::Fused) return torch::optim::SGD::step(std::move(closure));
  at::Tensor loss = detail::run_closure(closure);
  at::NoGradGuard no_grad;
  for (auto& group : param_groups()) fused_step(group);
  return loss;
}

#if MPIACCEL_TORCH_AT_LEAST(2, 4)

namespace {

// The parameters of one fused call: those whose momentum buffer exists, or
// those stepped for the first time (the kernel then copies the gradient into
// the buffer, as torch::optim::SGD clones it).
struct FusedBatch {
  std::vector<at::Tensor> params, grads, buffers;
};

}  // namespace

void SGD::fused_step(torch::optim::OptimizerParamGroup& group) {
  const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
  const bool momentum = o.momentum() != 0;
  FusedBatch later, first;
  for (const at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    FusedBatch* batch = &later;
    if (momentum) {
      const auto key = detail::optimizer_state_key(*this, p);
      auto found = state().find(key);
      if (found == state().end()) {
        auto fresh = std::make_unique<torch::optim::SGDParamState>();
        fresh->momentum_buffer(at::empty_like(p.grad(), at::MemoryFormat::Contiguous));
        found = state().emplace(key, std::move(fresh)).first;
        batch = &first;
      }
      batch->buffers.push_back(static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer());
    }
    batch->params.push_back(p);
    batch->grads.push_back(p.grad());
  }
  for (FusedBatch* batch : {&later, &first}) {
    if (batch->params.empty()) continue;
    at::_fused_sgd_(batch->params, batch->grads, batch->buffers, o.weight_decay(), o.momentum(), o.lr(),
                    o.dampening(), o.nesterov(), /*maximize=*/false,
                    /*is_first_step=*/batch == &first);
  }
}

#else

void SGD::fused_step(torch::optim::OptimizerParamGroup&) {
  MPIACCEL_THROW("mpiaccel::SGD: this LibTorch has no fused SGD kernel");
}

#endif

}  // namespace mpiaccel
