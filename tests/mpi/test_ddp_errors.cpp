// ctest: links mpiaccel; np 2 3 4; timeout 120
// DDP failures that involve several ranks end with the same error on every
// rank and no hang: a model that differs across ranks, a parameter without a
// gradient (no find_unused_parameters). And a rank whose loss reaches no
// parameter still joins the other ranks' all-reduces.
#define BOOST_TEST_MODULE ddp_errors
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"

using namespace mpiaccel;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

struct Net : torch::nn::Module {
  Net(int64_t hidden, bool with_extra = false) {
    fc = register_module("fc", torch::nn::Linear(8, hidden));
    branch = register_module("branch", torch::nn::Linear(hidden, hidden));
    head = register_module("head", torch::nn::Linear(hidden, 2));
    if (with_extra) extra = register_module("extra", torch::nn::Linear(2, 2));
  }
  torch::Tensor forward(torch::Tensor x, bool use_branch) {
    auto h = torch::tanh(fc->forward(x));
    if (use_branch) h = h + branch->forward(h);
    return head->forward(h);
  }
  torch::nn::Linear fc{nullptr}, branch{nullptr}, head{nullptr}, extra{nullptr};
};

// The error message every rank got (or "" if none), checked to be the same
// on every rank.
template <typename F>
std::string error_of(F&& body) {
  std::string message;
  try {
    body();
  } catch (const mpiaccel::Error& e) {
    message = e.message();
  }
  const auto all = world().all_gather_bytes(message);
  for (const auto& other : all) BOOST_TEST(other == all[0], "another rank got: " << other);
  BOOST_TEST_MESSAGE("rank " << world().rank() << " error: " << message);
  return message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(model_differs_across_ranks_shape) {
  test::require_world_size(2);
  at::set_num_threads(1);
  auto model = std::make_shared<Net>(world().rank() == 1 ? 32 : 16);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  mpiaccel::detail::DdpStrategy ddp(DdpConfig{}, world_ptr());
  const std::string message = error_of([&] { ddp.prepare(model, opt); });
  BOOST_TEST(contains(message, "model differs across ranks: rank 1: parameter fc.weight has shape "
                               "[32, 8], rank 0 has [16, 8]"),
             message);
  world().barrier();  // the communicator is still usable: nobody is stuck in a collective
}

BOOST_AUTO_TEST_CASE(model_differs_across_ranks_dtype_and_names) {
  test::require_world_size(2);
  const int last = world().size() - 1;
  auto model = std::make_shared<Net>(16);
  if (world().rank() == last) model->head->to(torch::kDouble);
  std::string message = error_of([&] { check_same_model_across_ranks(world(), *model); });
  BOOST_TEST(contains(message, "rank " + std::to_string(last) +
                                   ": parameter head.weight has dtype float64, rank 0 has float32"),
             message);

  auto other = std::make_shared<Net>(16, /*with_extra=*/world().rank() == last);
  message = error_of([&] { check_same_model_across_ranks(world(), *other); });
  BOOST_TEST(contains(message, "rank " + std::to_string(last) +
                                   ": has parameter extra.weight [2, 2] that rank 0 lacks"),
             message);
}

BOOST_AUTO_TEST_CASE(unused_parameter_without_the_flag) {
  test::require_world_size(2);
  at::set_num_threads(1);
  torch::manual_seed(1);
  auto model = std::make_shared<Net>(16);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  mpiaccel::detail::DdpStrategy ddp(DdpConfig{}, world_ptr());
  ddp.prepare(model, opt);
  auto x = torch::randn({4, 8});
  // Every rank but 0 takes the branch: rank 0's branch.* get no gradient.
  const std::string message = error_of([&] {
    model->forward(x, world().rank() != 0).sum().backward();
    ddp.after_backward();
  });
  BOOST_TEST(contains(message, "rank 0: parameter branch.weight received no gradient in this step "
                               "(and 1 more): set [ddp] find_unused_parameters = true"),
             message);
  // The reducer recovered: a step in which every rank uses every parameter works.
  ddp.zero_grad(*opt);
  const std::string none = error_of([&] {
    model->forward(x, true).sum().backward();
    ddp.after_backward();
  });
  BOOST_TEST(none.empty(), none);
  const double norm = ddp.grad_norm();
  MPIACCEL_CHECK_ALL(world().all_reduce_scalar(norm, ReduceOp::Max) ==
                     world().all_reduce_scalar(norm, ReduceOp::Min));
}

BOOST_AUTO_TEST_CASE(rank_whose_loss_reaches_no_parameter) {
  test::require_world_size(2);
  at::set_num_threads(1);
  torch::manual_seed(2);
  auto model = std::make_shared<Net>(16);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  DdpConfig config;
  config.find_unused_parameters = true;
  config.bucket_cap_mb = 1e-6;
  mpiaccel::detail::DdpStrategy ddp(config, world_ptr());
  ddp.prepare(model, opt);
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad(*opt);
    torch::manual_seed(10 + step);
    auto x = torch::randn({4, 8});
    torch::Tensor loss;
    if (world().rank() == 1)
      loss = (torch::ones({1}, torch::requires_grad()) * 2).sum();  // no parameter involved
    else
      loss = model->forward(x, true).pow(2).mean();
    loss.backward();
    ddp.after_backward();  // rank 1 finishes its (hook-less) backward here
    // Expected: the sum of the other ranks' gradients / world size, on every rank.
    const int n = world().size();
    auto reference = std::make_shared<Net>(16);
    {
      torch::NoGradGuard no_grad;
      auto src = model->parameters();
      auto dst = reference->parameters();
      for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    }
    auto ref_loss = reference->forward(x, true).pow(2).mean() * (n - 1) / n;
    ref_loss.backward();
    double worst = 0;
    auto got = model->parameters();
    auto want = reference->parameters();
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, (got[i].grad() - want[i].grad()).abs().max().item<double>() /
                                  (want[i].grad().abs().max().item<double>() + 1e-12));
    MPIACCEL_CHECK_ALL(worst < 1e-5);
    ddp.step(*opt);
  }
}
