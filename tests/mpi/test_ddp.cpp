// ctest: links mpiaccel; np 1 2 3 4; timeout 300
// DDP equivalence: N ranks with per-rank batch B/N reproduce single-process
// training with batch B (losses and parameters after 10 steps within 1e-5
// relative, fp32), across bucket sizes, gradient accumulation, bucket views,
// unused parameters and static graphs; and the overlap of the first bucket's
// all_reduce with backward.
#define BOOST_TEST_MODULE ddp
#include "runtime/torch_compat.hpp"
#include "support/mpi_test.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/Parallel.h>

#include "ddp/ddp_strategy.hpp"
#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

DdpConfig ddp_config(double cap_mb, bool find_unused = false, bool view = false,
                     bool static_graph = false) {
  DdpConfig c;
  c.bucket_cap_mb = cap_mb;
  c.find_unused_parameters = find_unused;
  c.gradient_as_bucket_view = view;
  c.static_graph = static_graph;
  return c;
}

Trial mlp_trial(double cap_mb, const std::string& optimizer) {
  Trial t;
  t.model = test_net([] { return std::make_shared<Mlp>(8, 16, 4, 3); });
  t.data = random_batches({12, 8}, {12, 4});
  t.optimizer = one_group(optimizer);
  t.strategy = ddp_plug(ddp_config(cap_mb));
  t.reference_one_forward = true;
  return t;
}

Trial block_trial(double cap_mb, const std::string& optimizer) {
  Trial t = mlp_trial(cap_mb, optimizer);
  t.model = test_net([] { return std::make_shared<TinyBlock>(); });
  t.data = random_batches({12, TinyBlock::kT, TinyBlock::kD}, {12, 3});
  return t;
}

mpiaccel::detail::DdpStrategy& ddp_of(const TrialRun& run) {
  return dynamic_cast<mpiaccel::detail::DdpStrategy&>(*run.strategy);
}

void expect_equivalent(const Trial& trial, const char* what) {
  at::set_num_threads(1);
  const TrialRun r = run_trial(trial, world_ptr());
  auto& strategy = ddp_of(r);
  BOOST_TEST_MESSAGE(what << ": np " << world().size() << ": max loss rel diff "
                          << r.max_loss_rel << ", max param rel diff " << r.max_param_rel
                          << ", buckets " << strategy.reducer().bucket_assignment().size());
  MPIACCEL_CHECK_ALL(r.max_loss_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(r.max_param_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(r.checks_ok);
  MPIACCEL_CHECK_ALL(strategy.reducer().iterations() == trial.steps);
  MPIACCEL_CHECK_ALL(strategy.reducer().buckets_rebuilt());
}

// A bucket cap far below any gradient: one bucket per parameter.
constexpr double kTinyCap = 1e-6;
constexpr double kHugeCap = 1e6;

}  // namespace

BOOST_AUTO_TEST_CASE(mlp_sgd_default_buckets) { expect_equivalent(mlp_trial(25, "sgd"), "mlp sgd 25 MiB"); }

BOOST_AUTO_TEST_CASE(mlp_adamw_tiny_buckets) {
  Trial t = mlp_trial(kTinyCap, "adamw");
  // Check the layout too: one bucket per parameter.
  expect_equivalent(t, "mlp adamw tiny buckets");
}

BOOST_AUTO_TEST_CASE(mlp_sgd_one_huge_bucket) {
  expect_equivalent(mlp_trial(kHugeCap, "sgd"), "mlp sgd huge bucket");
}

BOOST_AUTO_TEST_CASE(block_adamw_tiny_buckets) {
  expect_equivalent(block_trial(kTinyCap, "adamw"), "block adamw tiny buckets");
}

BOOST_AUTO_TEST_CASE(block_sgd_one_huge_bucket) {
  expect_equivalent(block_trial(kHugeCap, "sgd"), "block sgd huge bucket");
}

BOOST_AUTO_TEST_CASE(gradient_accumulation_no_sync) {
  for (bool view : {false, true}) {
    Trial t = mlp_trial(kTinyCap, "sgd");
    t.data = random_batches({24, 8}, {24, 4});
    t.accum = 2;
    t.strategy.config.ddp.gradient_as_bucket_view = view;
    expect_equivalent(t, view ? "mlp accum 2, bucket views" : "mlp accum 2");
    Trial b = block_trial(kHugeCap, "adamw");
    b.data = random_batches({24, TinyBlock::kT, TinyBlock::kD}, {24, 3});
    b.accum = 2;
    b.strategy.config.ddp.gradient_as_bucket_view = view;
    expect_equivalent(b, view ? "block accum 2, bucket views" : "block accum 2");
  }
}

BOOST_AUTO_TEST_CASE(gradient_as_bucket_view) {
  at::set_num_threads(1);
  for (double cap : {kTinyCap, kHugeCap}) {
    Trial t = block_trial(cap, "adamw");
    t.strategy.config.ddp.gradient_as_bucket_view = true;
    t.strategy.config.ddp.node_shared_params = false;  // the plain replica layout (node-shared: below)
    const TrialRun r = run_trial(t, world_ptr());
    auto& strategy = ddp_of(r);
    MPIACCEL_CHECK_ALL(r.max_loss_rel <= kTolerance);
    MPIACCEL_CHECK_ALL(r.max_param_rel <= kTolerance);
    // Every .grad is its bucket view (after the rebuild, in the new buckets).
    auto& reducer = strategy.reducer();
    bool all_views = true;
    for (size_t i = 0; i < reducer.grad_params().size(); ++i)
      all_views = all_views && reducer.grad_params()[i].grad().is_alias_of(reducer.bucket_view(i));
    MPIACCEL_CHECK_ALL(all_views);
    // zero_grad does what the LibTorch's Optimizer::zero_grad() does: 2.x
    // leaves the gradients undefined (the next backward binds them to their
    // views again, as every step of the trial above did), 1.13 zeroes the
    // views in place.
    torch::optim::SGD dummy(std::vector<torch::Tensor>{}, torch::optim::SGDOptions(0.1));
    strategy.zero_grad(dummy);
    bool reset = true;
    for (size_t i = 0; i < reducer.grad_params().size(); ++i) {
      const at::Tensor& grad = reducer.grad_params()[i].grad();
      reset = reset && (mpiaccel::detail::kZeroGradSetsToNone
                            ? !grad.defined()
                            : grad.is_alias_of(reducer.bucket_view(i)) && grad.abs().sum().item<double>() == 0);
    }
    MPIACCEL_CHECK_ALL(reset);
  }
}

namespace {

// Step s: s % 3 == 0 only rank 0 takes the branch; 1: every rank; 2: none.
bool branch_pattern(int owner, int step, int) {
  return step % 3 == 0 ? owner == 0 : step % 3 == 1;
}

Trial branch_trial(bool view) {
  Trial t;
  t.model = test_net([] { return std::make_shared<BranchNet>(branch_pattern); });
  t.data = random_batches({12, 8}, {12, 4});
  t.optimizer = one_group("sgd");
  t.strategy = ddp_plug(ddp_config(kTinyCap, /*find_unused=*/true, view));
  // The reference too computes each rank's rows with that rank's branches.
  t.reference_one_forward = false;
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(find_unused_parameters_branch) {
  for (bool view : {false, true}) {
    Trial t = branch_trial(view);
    // Gradients of globally unused parameters are as in one process: `never`
    // keeps no gradient at all; in the steps no rank takes `branch`, its
    // gradient is what zero_grad left: zeros (LibTorch 1.13) or none (2.x).
    t.check = [](torch::nn::Module& net, int step) {
      auto& b = static_cast<BranchNet&>(net);
      bool ok = !b.never->weight.grad().defined() && !b.never->bias.grad().defined();
      const at::Tensor& grad = b.branch->weight.grad();
      if (step % 3 == 2)
        ok = ok && (mpiaccel::detail::kZeroGradSetsToNone
                        ? !grad.defined()
                        : grad.defined() && grad.abs().sum().item<double>() == 0);
      return ok;
    };
    expect_equivalent(t, view ? "branch find_unused, bucket views" : "branch find_unused");
  }
}

BOOST_AUTO_TEST_CASE(find_unused_parameters_with_accumulation) {
  // The branch is used in some micro-steps on some ranks: the used map must
  // OR over the no_sync window.
  Trial t = branch_trial(false);
  t.model = test_net([] {
    return std::make_shared<BranchNet>([](int owner, int step, int micro) {
      return (owner + step + micro) % 3 == 0;
    });
  });
  t.data = random_batches({24, 8}, {24, 4});
  t.accum = 2;
  expect_equivalent(t, "branch find_unused accum 2");
}

BOOST_AUTO_TEST_CASE(static_graph_with_find_unused) {
  // Static graph: the same parameters are used in every step (per rank), so
  // the used map of the first step is reused.
  Trial t = branch_trial(false);
  t.model = test_net(
      [] { return std::make_shared<BranchNet>([](int owner, int, int) { return owner == 0; }); });
  t.strategy.config.ddp.static_graph = true;
  t.check = [](torch::nn::Module& net, int) {
    return !static_cast<BranchNet&>(net).never->weight.grad().defined();
  };
  expect_equivalent(t, "branch static_graph");
}

BOOST_AUTO_TEST_CASE(first_bucket_all_reduce_overlaps_backward) {
  at::set_num_threads(1);
  // Deep enough that backward lasts long after the last layers' gradients
  // (the first bucket, 1 MiB) are ready.
  torch::manual_seed(3);
  auto model = std::make_shared<Mlp>(256, 256, 256, 16);
  auto opt = one_group("sgd")(*model);
  mpiaccel::detail::DdpStrategy strategy(ddp_config(1), world_ptr());
  strategy.prepare(model, opt);
  auto& reducer = strategy.reducer();
  // Launching before backward ends is the reducer's doing: every step.
  // Starting before it ends also needs the communication thread to get a
  // core while backward computes, which a loaded machine (ctest -j2, ranks
  // oversubscribed) may deny now and then: at least half the steps after
  // the rebuild.
  bool launched_early = true;
  int started_early = 0;
  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(50 + step);
    auto x = torch::randn({256, 256});
    strategy.zero_grad(*opt);
    const auto begin = std::chrono::steady_clock::now();
    model->forward(x).pow(2).mean().backward();
    strategy.after_backward();
    const auto timings = reducer.last_bucket_timings();
    const auto end = reducer.last_backward_end();
    const auto ms = [&](auto t) {
      return std::chrono::duration<double, std::milli>(t - begin).count();
    };
    BOOST_TEST_MESSAGE("step " << step << " rank " << world().rank() << ": "
                               << timings.size() << " buckets, first launched "
                               << ms(timings[0].launched) << " ms, started "
                               << ms(timings[0].started) << " ms, backward ended " << ms(end)
                               << " ms, last bucket finished " << ms(timings.back().finished)
                               << " ms");
    if (step > 0) {  // after the rebuild too
      launched_early = launched_early && timings.size() > 1 && timings[0].launched < end;
      started_early += timings[0].started < end ? 1 : 0;
    }
    opt->step();
  }
  MPIACCEL_CHECK_ALL(launched_early);
  MPIACCEL_CHECK_ALL(2 * started_early >= kSteps - 1);
}

BOOST_AUTO_TEST_CASE(libtorch_optimizer_zero_grad_keeps_bucket_views) {
  // Users may call optimizer.zero_grad() themselves. LibTorch 1.13 zeroes in
  // place, so the bucket views stay bound; 2.x sets the gradients to
  // undefined, and the next backward binds the views again (one copy per
  // gradient in that step). (Not with node-shared parameters:
  // there the optimizer holds row views and must be driven through the
  // strategy, as with ZeRO; docs/ddp.md.)
  at::set_num_threads(1);
  torch::manual_seed(4);
  auto model = std::make_shared<Mlp>(8, 16, 4, 2);
  auto opt = one_group("sgd")(*model);
  DdpConfig config = ddp_config(25, false, /*view=*/true);
  config.node_shared_params = false;
  mpiaccel::detail::DdpStrategy strategy(config, world_ptr());
  strategy.prepare(model, opt);
  for (int step = 0; step < 2; ++step) {
    opt->zero_grad();
    model->forward(torch::randn({6, 8})).sum().backward();
    strategy.after_backward();
    opt->step();
  }
  auto& reducer = strategy.reducer();
  auto all_bound = [&](bool zero) {
    bool bound = true;
    for (size_t i = 0; i < reducer.grad_params().size(); ++i) {
      const at::Tensor& grad = reducer.grad_params()[i].grad();
      bound = bound && grad.defined() && grad.is_alias_of(reducer.bucket_view(i)) &&
              (!zero || grad.abs().sum().item<double>() == 0);
    }
    return bound;
  };
  MPIACCEL_CHECK_ALL(all_bound(false));  // bound after every synchronized backward
  opt->zero_grad();
  if (!mpiaccel::detail::kZeroGradSetsToNone) MPIACCEL_CHECK_ALL(all_bound(true));
}

// [ddp] node_shared_params (the default): on one node the ranks hold ONE copy
// of the parameters, and each keeps the optimizer state of its rows only.
BOOST_AUTO_TEST_CASE(node_shared_params_are_one_copy_per_node) {
  at::set_num_threads(1);
  const int n = world().size();
  Trial t = mlp_trial(25, "adamw");
  t.strategy.config.ddp.gradient_as_bucket_view = true;  // the default
  const TrialRun r = run_trial(t, world_ptr());
  auto& strategy = ddp_of(r);
  MPIACCEL_CHECK_ALL(r.max_loss_rel <= kTolerance && r.max_param_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(strategy.node_shared() == (n > 1));
  if (n == 1) return;
  // A write on rank 0 is seen by every rank: the memory is shared.
  const at::Tensor p = strategy.reducer().grad_params()[0];
  const double before = p.sum().item<double>();
  world().barrier();
  if (world().rank() == 0) {
    at::NoGradGuard no_grad;
    p.add_(1.0);
  }
  world().barrier();
  const double after = p.sum().item<double>();
  MPIACCEL_CHECK_ALL(std::abs(after - (before + static_cast<double>(p.numel()))) < 1e-3 * p.numel());
  // AdamW's two slots, for this rank's rows of every parameter only.
  int64_t own_elements = 0;
  for (const at::Tensor& q : strategy.reducer().grad_params()) {
    const int64_t rows = q.dim() == 0 ? 1 : q.size(0);
    const RowRange range = chunk_row_range(rows, n, world().rank());
    own_elements += range.count * (rows == 0 ? 0 : q.numel() / rows);
  }
  const auto account = strategy.memory(*r.optimizer);
  MPIACCEL_CHECK_ALL(account.optimizer_bytes == 2 * 4 * own_elements);
}

// Users who zero with LibTorch's own Module::zero_grad() (in place) instead of
// the strategy's: the optimizer's row views see the same gradient memory.
BOOST_AUTO_TEST_CASE(node_shared_params_with_the_modules_own_zero_grad) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    Trial t = block_trial(kHugeCap, optimizer);
    t.strategy.config.ddp.gradient_as_bucket_view = true;
    t.zero_with_module = true;
    expect_equivalent(t, "block, Module::zero_grad");
  }
}

BOOST_AUTO_TEST_CASE(replicated_params_without_node_sharing) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    Trial t = block_trial(kTinyCap, optimizer);
    t.strategy.config.ddp.node_shared_params = false;
    expect_equivalent(t, "block, every rank its own replica");
  }
}
