// ctest: links mpiaccel; timeout 120
// mpiaccel::AdamW and mpiaccel::SGD against torch::optim's own: the kernel
// each step picks (step_kernel.cpp), and the same parameters and state after
// several steps over two groups, with parameters that skip steps or get their
// first gradient late.
#define BOOST_TEST_MODULE optimizers
#include <boost/test/unit_test.hpp>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "mpiaccel/optim.hpp"
#include "optim/step_kernel.hpp"
#include "runtime/torch_compat.hpp"

namespace {

using mpiaccel::detail::choose_step_kernel;
using mpiaccel::detail::OptimizerKind;
using mpiaccel::detail::StepKernel;
using torch::optim::OptimizerParamGroup;

// Relative distance of `ours` from `ref`, the largest over tensor pairs.
double max_rel(const std::vector<at::Tensor>& ours, const std::vector<at::Tensor>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto a = ours[i].detach().to(at::kDouble), b = ref[i].detach().to(at::kDouble);
    worst = std::max(worst, (a - b).norm().item<double>() / (b.norm().item<double>() + 1e-30));
  }
  return worst;
}

std::vector<at::Tensor> random_params(at::ScalarType dtype) {
  torch::manual_seed(3);
  std::vector<at::Tensor> params;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{300, 7}, {5}, {1025}, {2, 3}})
    params.push_back(torch::randn(shape).to(dtype).requires_grad_(true));
  return params;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

template <typename Options>
std::vector<OptimizerParamGroup> two_groups(const std::vector<at::Tensor>& ps, Options first, Options second) {
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>(ps.begin(), ps.begin() + 2), std::make_unique<Options>(first));
  groups.emplace_back(std::vector<at::Tensor>(ps.begin() + 2, ps.end()), std::make_unique<Options>(second));
  return groups;
}

// `steps` steps of both optimizers on the same gradients: parameter 1 skips
// every third step, parameter 3 gets its first gradient at step 2.
void step_both(torch::optim::Optimizer& ours, std::vector<at::Tensor>& a, torch::optim::Optimizer& ref,
               std::vector<at::Tensor>& b, int steps) {
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      const bool none = (i == 1 && step % 3 == 2) || (i == 3 && step < 2);
      const auto g = (torch::randn(a[i].sizes()) * (1.0 + step)).to(a[i].scalar_type());
      a[i].mutable_grad() = none ? at::Tensor() : g.clone();
      b[i].mutable_grad() = none ? at::Tensor() : g.clone();
    }
    ours.step();
    ref.step();
  }
}

// The parameters' distance; the state is held to `state_tolerance`.
double adamw_distance(at::ScalarType dtype, int threads, double state_tolerance) {
  at::set_num_threads(threads);
  auto a = random_params(dtype);
  auto b = clones(a);
  using torch::optim::AdamWOptions;
  const auto first = AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95});
  const auto second = AdamWOptions(3e-3).weight_decay(0).amsgrad(true);
  mpiaccel::AdamW ours(two_groups(a, first, second), AdamWOptions());
  torch::optim::AdamW ref(two_groups(b, first, second), AdamWOptions());
  step_both(ours, a, ref, b, 6);
  for (size_t i = 0; i < a.size(); ++i) {
    using mpiaccel::detail::optimizer_state_key;
    const auto& sa = static_cast<torch::optim::AdamWParamState&>(*ours.state().at(optimizer_state_key(ours, a[i])));
    const auto& sb = static_cast<torch::optim::AdamWParamState&>(*ref.state().at(optimizer_state_key(ref, b[i])));
    BOOST_TEST(sa.step() == sb.step());
    BOOST_TEST(max_rel({sa.exp_avg(), sa.exp_avg_sq()}, {sb.exp_avg(), sb.exp_avg_sq()}) <= state_tolerance);
  }
  return max_rel(a, b);
}

double sgd_distance(torch::optim::SGDOptions options) {
  at::set_num_threads(1);
  auto a = random_params(at::kFloat);
  auto b = clones(a);
  auto plain = options;
  plain.weight_decay(0);
  mpiaccel::SGD ours(two_groups(a, options, plain), options);
  torch::optim::SGD ref(two_groups(b, options, plain), options);
  step_both(ours, a, ref, b, 7);
  return max_rel(a, b);
}

StepKernel kernel_for(OptimizerKind kind, std::vector<at::Tensor> params) {
  for (auto& p : params) p.mutable_grad() = at::ones_like(p);
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(params);
  return choose_step_kernel(kind, groups);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_kernel_follows_device_dtype_and_libtorch) {
  const auto f32 = torch::zeros({4}), bf16 = torch::zeros({4}, torch::kBFloat16);
  const auto fused_cpu = MPIACCEL_TORCH_AT_LEAST(2, 4) ? StepKernel::Fused : StepKernel::Reference;
  BOOST_TEST((kernel_for(OptimizerKind::AdamW, {f32.clone()}) == StepKernel::Host));
  BOOST_TEST((kernel_for(OptimizerKind::AdamW, {bf16.clone()}) == fused_cpu));
  BOOST_TEST((kernel_for(OptimizerKind::SGD, {f32.clone()}) == fused_cpu));
  // Mixed dtypes, a non-contiguous parameter, no gradient at all: the reference.
  BOOST_TEST((kernel_for(OptimizerKind::AdamW, {f32.clone(), bf16.clone()}) == StepKernel::Reference));
  BOOST_TEST((kernel_for(OptimizerKind::SGD, {torch::zeros({3, 4}).t()}) == StepKernel::Reference));
  std::vector<OptimizerParamGroup> none;
  none.emplace_back(std::vector<at::Tensor>{torch::zeros({2})});
  BOOST_TEST((choose_step_kernel(OptimizerKind::AdamW, none) == StepKernel::Reference));
}

BOOST_AUTO_TEST_CASE(adamw_float32_matches_torch) {
  // The host kernel: LibTorch 1.13's arithmetic exactly; 2.x's CPU kernels
  // round a few elements differently (test_host_adamw).
  BOOST_TEST(adamw_distance(at::kFloat, 1, 1e-6) <= 1e-6);
  BOOST_TEST(adamw_distance(at::kFloat, 2, 1e-6) <= 1e-6);
}

BOOST_AUTO_TEST_CASE(adamw_double_and_bfloat16_match_torch) {
  // The fused CPU kernel where LibTorch has it, the reference elsewhere.
  BOOST_TEST(adamw_distance(at::kDouble, 1, 1e-12) <= 1e-12);
  // bf16 keeps 8 bits; the fused kernel computes in float and rounds once.
  BOOST_TEST(adamw_distance(at::kBFloat16, 1, 2e-2) <= 2e-2);
}

BOOST_AUTO_TEST_CASE(sgd_matches_torch) {
  using torch::optim::SGDOptions;
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.9).weight_decay(0.01)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.8).nesterov(true)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.1)) <= 1e-6);  // no momentum: no state
}
