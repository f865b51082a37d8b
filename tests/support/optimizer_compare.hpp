#pragma once
// Steps one of our optimizers and torch::optim's reference side by side on the
// same parameters and gradients (tests of mpiaccel::AdamW and mpiaccel::SGD,
// on the CPU and on a GPU).

#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "mpiaccel/optim.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel::test {

// Relative distance of `ours` from `ref`, the largest over tensor pairs.
inline double max_rel(const std::vector<at::Tensor>& ours, const std::vector<at::Tensor>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto a = ours[i].detach().to(at::kDouble), b = ref[i].detach().to(at::kDouble);
    worst = std::max(worst, (a - b).norm().item<double>() / (b.norm().item<double>() + 1e-30));
  }
  return worst;
}

// Four parameters of awkward sizes (vector tails, a tiny one).
inline std::vector<at::Tensor> random_params(at::ScalarType dtype, at::Device device = at::kCPU) {
  torch::manual_seed(3);
  std::vector<at::Tensor> params;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{300, 7}, {5}, {1025}, {2, 3}})
    params.push_back(torch::randn(shape).to(device, dtype).requires_grad_(true));
  return params;
}

inline std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

// The first two parameters with `first`'s options, the rest with `second`'s.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> two_groups(const std::vector<at::Tensor>& ps, Options first,
                                                          Options second) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>(ps.begin(), ps.begin() + 2), std::make_unique<Options>(first));
  groups.emplace_back(std::vector<at::Tensor>(ps.begin() + 2, ps.end()), std::make_unique<Options>(second));
  return groups;
}

// `steps` steps of both optimizers on the same gradients: parameter 1 skips
// every third step, parameter 3 gets its first gradient at step 2.
inline void step_both(torch::optim::Optimizer& ours, std::vector<at::Tensor>& a, torch::optim::Optimizer& ref,
                      std::vector<at::Tensor>& b, int steps) {
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      const bool none = (i == 1 && step % 3 == 2) || (i == 3 && step < 2);
      const auto g = (torch::randn(a[i].sizes()) * (1.0 + step)).to(a[i].device(), a[i].scalar_type());
      a[i].mutable_grad() = none ? at::Tensor() : g.clone();
      b[i].mutable_grad() = none ? at::Tensor() : g.clone();
    }
    ours.step();
    ref.step();
  }
}

struct AdamwDistance {
  double params = 0;        // relative, the largest over parameters
  double state = 0;         // exp_avg and exp_avg_sq, the same
  bool same_steps = true;   // every parameter's step count equal
};

// mpiaccel::AdamW against torch::optim::AdamW over 6 steps of two groups
// (weight decay and betas in one, amsgrad in the other) on `device`.
inline AdamwDistance adamw_distance(at::ScalarType dtype, at::Device device = at::kCPU) {
  auto a = random_params(dtype, device);
  auto b = clones(a);
  using torch::optim::AdamWOptions;
  const auto first = AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95});
  const auto second = AdamWOptions(3e-3).weight_decay(0).amsgrad(true);
  mpiaccel::AdamW ours(two_groups(a, first, second), AdamWOptions());
  torch::optim::AdamW ref(two_groups(b, first, second), AdamWOptions());
  step_both(ours, a, ref, b, 6);
  AdamwDistance d;
  d.params = max_rel(a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    using detail::optimizer_state_key;
    using State = torch::optim::AdamWParamState;
    const auto& sa = static_cast<const State&>(*ours.state().at(optimizer_state_key(ours, a[i])));
    const auto& sb = static_cast<const State&>(*ref.state().at(optimizer_state_key(ref, b[i])));
    d.same_steps = d.same_steps && sa.step() == sb.step();
    d.state = std::max(d.state, max_rel({sa.exp_avg(), sa.exp_avg_sq()}, {sb.exp_avg(), sb.exp_avg_sq()}));
  }
  return d;
}

// mpiaccel::SGD against torch::optim::SGD over 7 steps of two groups (the
// second without weight decay) on `device`: the parameters' distance.
inline double sgd_distance(torch::optim::SGDOptions options, at::Device device = at::kCPU) {
  auto a = random_params(at::kFloat, device);
  auto b = clones(a);
  auto plain = options;
  plain.weight_decay(0);
  mpiaccel::SGD ours(two_groups(a, options, plain), options);
  torch::optim::SGD ref(two_groups(b, options, plain), options);
  step_both(ours, a, ref, b, 7);
  return max_rel(a, b);
}

}  // namespace mpiaccel::test
