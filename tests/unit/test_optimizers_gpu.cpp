// ctest: links mpiaccel; timeout 120; labels gpu
// mpiaccel::AdamW and mpiaccel::SGD on CUDA parameters: LibTorch's fused CUDA
// kernels (_fused_adamw_, _fused_sgd_) against torch::optim's own step, as
// test_optimizers does on the CPU. Runs only where CUDA is (label gpu,
// excluded by `make test`); without a GPU it fails, it never skips.
#define BOOST_TEST_MODULE optimizers_gpu
#include <boost/test/unit_test.hpp>

#include <ATen/Context.h>

#include "optim/step_kernel.hpp"
#include "support/optimizer_compare.hpp"

using namespace mpiaccel::test;

BOOST_AUTO_TEST_CASE(fused_cuda_kernels_match_torch) {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  const at::Device cuda(at::kCUDA, 0);
  auto p = torch::zeros({4}, torch::TensorOptions(cuda));
  p.mutable_grad() = at::ones_like(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{p});
  using mpiaccel::detail::OptimizerKind;
  using mpiaccel::detail::StepKernel;
  BOOST_TEST((mpiaccel::detail::choose_step_kernel(OptimizerKind::AdamW, groups) == StepKernel::Fused));
  BOOST_TEST((mpiaccel::detail::choose_step_kernel(OptimizerKind::SGD, groups) == StepKernel::Fused));

  const AdamwDistance d = adamw_distance(at::kFloat, cuda);
  BOOST_TEST(d.same_steps);
  BOOST_TEST(d.params <= 1e-5);
  BOOST_TEST(d.state <= 1e-5);
  using torch::optim::SGDOptions;
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01), cuda) <= 1e-5);
  BOOST_TEST(sgd_distance(SGDOptions(0.05).momentum(0.8).nesterov(true), cuda) <= 1e-5);
}
