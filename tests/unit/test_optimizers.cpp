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
#include "support/optimizer_compare.hpp"

namespace {

using mpiaccel::detail::choose_step_kernel;
using mpiaccel::detail::OptimizerKind;
using mpiaccel::detail::StepKernel;
using torch::optim::OptimizerParamGroup;
using namespace mpiaccel::test;

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
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    const AdamwDistance d = adamw_distance(at::kFloat);
    BOOST_TEST(d.same_steps);
    BOOST_TEST(d.params <= 1e-6);
    BOOST_TEST(d.state <= 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(adamw_double_and_bfloat16_match_torch) {
  // The fused CPU kernel where LibTorch has it, the reference elsewhere.
  at::set_num_threads(1);
  const AdamwDistance d = adamw_distance(at::kDouble);
  BOOST_TEST(d.same_steps);
  BOOST_TEST(d.params <= 1e-12);
  BOOST_TEST(d.state <= 1e-12);
  // bf16 keeps 8 bits; the fused kernel computes in float and rounds once.
  const AdamwDistance b = adamw_distance(at::kBFloat16);
  BOOST_TEST(b.params <= 2e-2);
  BOOST_TEST(b.state <= 2e-2);
}

BOOST_AUTO_TEST_CASE(sgd_matches_torch) {
  using torch::optim::SGDOptions;
  at::set_num_threads(1);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.9).weight_decay(0.01)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.8).nesterov(true)) <= 1e-6);
  BOOST_TEST(sgd_distance(SGDOptions(0.1)) <= 1e-6);  // no momentum: no state
}
