// ctest: links mpiaccel; timeout 120
// The fused host AdamW against torch::optim::AdamW: same parameters and state
// after several steps, with and without weight decay and amsgrad, several
// parameter groups, uneven sizes (vector tails), 1 and 2 threads.
#define BOOST_TEST_MODULE host_adamw
#include <boost/test/unit_test.hpp>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "runtime/torch_compat.hpp"
#include "mpiaccel/optim.hpp"

namespace {

using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

struct Result {
  double max_rel = 0;     // over tensors: ||ours - torch|| / ||torch||
  int64_t differing = 0;  // elements whose bits differ
};

void compare(const at::Tensor& ours, const at::Tensor& ref, Result& r) {
  r.max_rel = std::max(r.max_rel, (ours - ref).norm().item<double>() / (ref.norm().item<double>() + 1e-30));
  r.differing += (ours != ref).sum().item<int64_t>();
}

// Two groups over parameters of awkward sizes; `steps` steps with fresh random
// gradients (some steps skip a parameter: no gradient, no update, as torch).
Result run(AdamWOptions first, AdamWOptions second, int steps, int threads) {
  at::set_num_threads(threads);
  torch::manual_seed(11);
  const std::vector<std::vector<int64_t>> shapes{{1000, 37}, {3}, {}, {70001}, {0}, {5, 7}};
  std::vector<at::Tensor> ours, ref;
  for (const auto& s : shapes) {
    auto t = torch::randn(s);
    ours.push_back(t.clone().requires_grad_(true));
    ref.push_back(t.clone().requires_grad_(true));
  }
  auto groups = [&](std::vector<at::Tensor>& ps) {
    std::vector<torch::optim::OptimizerParamGroup> g;
    g.emplace_back(std::vector<at::Tensor>(ps.begin(), ps.begin() + 3),
                   std::make_unique<AdamWOptions>(first));
    g.emplace_back(std::vector<at::Tensor>(ps.begin() + 3, ps.end()),
                   std::make_unique<AdamWOptions>(second));
    return g;
  };
  AdamW mine(groups(ours), AdamWOptions());
  AdamW torch_opt(groups(ref), AdamWOptions());
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto g = torch::randn(shapes[i]) * (1.0 + step);
      const bool skip = (step + i) % 4 == 3;
      ours[i].mutable_grad() = skip ? at::Tensor() : g.clone();
      ref[i].mutable_grad() = skip ? at::Tensor() : g.clone();
    }
    mpiaccel::host_adamw_step(mine);
    torch_opt.step();
  }
  Result r;
  for (size_t i = 0; i < shapes.size(); ++i) {
    compare(ours[i].detach(), ref[i].detach(), r);
    using mpiaccel::detail::optimizer_state_key;
    auto& a = static_cast<AdamWParamState&>(*mine.state().at(optimizer_state_key(mine, ours[i])));
    auto& b = static_cast<AdamWParamState&>(*torch_opt.state().at(optimizer_state_key(torch_opt, ref[i])));
    BOOST_TEST(a.step() == b.step());
    compare(a.exp_avg(), b.exp_avg(), r);
    compare(a.exp_avg_sq(), b.exp_avg_sq(), r);
    if (b.max_exp_avg_sq().defined()) compare(a.max_exp_avg_sq(), b.max_exp_avg_sq(), r);
  }
  return r;
}

[[maybe_unused]] bool have_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void expect_same(const Result& r, const char* what) {
  BOOST_TEST_MESSAGE(what << ": max rel diff " << r.max_rel << ", " << r.differing
                          << " elements differ in their bits");
  BOOST_TEST(r.max_rel <= 1e-6);
  // LibTorch 1.13 fuses exactly where the kernel does on AVX2+FMA CPUs: every
  // bit agrees. 2.x's CPU kernels round a few elements differently (33–129
  // of 71k here, 1e-9 relative), so there only the tolerance holds.
#if !MPIACCEL_TORCH_AT_LEAST(2, 0)
  if (have_avx2_fma()) BOOST_TEST(r.differing == 0);
#endif
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_torch_adamw_one_thread) {
  expect_same(run(AdamWOptions(1e-2).weight_decay(0.1), AdamWOptions(3e-3).weight_decay(0), 6, 1),
              "wd 0.1 / 0, 1 thread");
}

BOOST_AUTO_TEST_CASE(matches_torch_adamw_two_threads) {
  expect_same(run(AdamWOptions(1e-2).weight_decay(0.01).betas({0.8, 0.99}).eps(1e-6),
                  AdamWOptions(1e-3), 6, 2),
              "betas 0.8/0.99, 2 threads");
}

BOOST_AUTO_TEST_CASE(matches_torch_adamw_amsgrad) {
  expect_same(run(AdamWOptions(1e-2).amsgrad(true), AdamWOptions(2e-2).amsgrad(true).weight_decay(0.3),
                  7, 2),
              "amsgrad, 2 threads");
}

BOOST_AUTO_TEST_CASE(continues_torch_state) {
  // State made by torch's step, continued by ours (and the reverse), e.g. a
  // checkpoint written without offload and resumed with it.
  at::set_num_threads(1);
  torch::manual_seed(5);
  auto a = torch::randn({257}).requires_grad_(true);
  auto b = a.detach().clone().requires_grad_(true);
  AdamW oa({a}, AdamWOptions(1e-2).weight_decay(0.05));
  AdamW ob({b}, AdamWOptions(1e-2).weight_decay(0.05));
  for (int step = 0; step < 4; ++step) {
    auto g = torch::randn({257});
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    if (step % 2 == 0) oa.step(); else mpiaccel::host_adamw_step(oa);
    ob.step();
  }
  Result r;
  compare(a.detach(), b.detach(), r);
  expect_same(r, "alternating torch / host steps");
}

BOOST_AUTO_TEST_CASE(rejects_non_float_tensors) {
  auto p = torch::randn({4}, torch::kDouble).requires_grad_(true);
  AdamW opt({p}, AdamWOptions(1e-2));
  p.mutable_grad() = torch::ones({4}, torch::kDouble);
  BOOST_CHECK_THROW(mpiaccel::host_adamw_step(opt), std::exception);
}

BOOST_AUTO_TEST_CASE(hooks_run_around_each_parameter_with_a_gradient) {
  // ZeRO offload waits for a parameter's gradient in `before` and starts its
  // copy back in `after`: each must see the parameter before and after its
  // own update, once, in order; parameters without a gradient get neither;
  // and the arithmetic is the hook-free step's, bit for bit.
  at::set_num_threads(1);
  torch::manual_seed(7);
  std::vector<at::Tensor> ours, ref;
  for (int64_t n : {33, 5, 1000}) {
    auto t = torch::randn({n});
    ours.push_back(t.clone().requires_grad_(true));
    ref.push_back(t.clone().requires_grad_(true));
  }
  AdamW with_hooks(ours, AdamWOptions(1e-2).weight_decay(0.1));
  AdamW without(ref, AdamWOptions(1e-2).weight_decay(0.1));
  std::vector<std::string> events;
  const auto name_of = [&](const at::Tensor& p) {
    for (size_t i = 0; i < ours.size(); ++i)
      if (p.is_same(ours[i])) return std::to_string(i);
    return std::string("?");
  };
  std::vector<at::Tensor> seen_before;
  mpiaccel::HostStepHooks hooks;
  hooks.before = [&](const at::Tensor& p) {
    events.push_back("before " + name_of(p));
    seen_before.push_back(p.detach().clone());
  };
  hooks.after = [&](const at::Tensor& p) {
    events.push_back("after " + name_of(p));
    BOOST_TEST(!p.detach().equal(seen_before.back()), "after() must see the updated values");
  };
  for (int step = 0; step < 3; ++step) {
    events.clear();
    seen_before.clear();
    for (size_t i = 0; i < ours.size(); ++i) {
      auto g = torch::randn(ours[i].sizes());
      const bool skip = step == 1 && i == 1;
      ours[i].mutable_grad() = skip ? at::Tensor() : g.clone();
      ref[i].mutable_grad() = skip ? at::Tensor() : g.clone();
    }
    mpiaccel::host_adamw_step(with_hooks, hooks);
    mpiaccel::host_adamw_step(without);
    const std::vector<std::string> expected =
        step == 1 ? std::vector<std::string>{"before 0", "after 0", "before 2", "after 2"}
                  : std::vector<std::string>{"before 0", "after 0", "before 1", "after 1",
                                             "before 2", "after 2"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
  }
  for (size_t i = 0; i < ours.size(); ++i) BOOST_TEST(ours[i].detach().equal(ref[i].detach()));
}
