// ctest: links mpiaccel; np 1 2 3 4; timeout 400
// Mixed-precision communication (docs/precision.md): with reduce_dtype = bf16
// every strategy reduces its gradients in bf16 (half the bytes) and still
// reproduces fp32 single-process training to bf16 accuracy; with
// param_dtype = bf16, FSDP/ZeRO-3 gather parameters in bf16. The same trial
// with fp32 communication matches the reference to fp32 accuracy, so the
// bf16 runs differ from it because of the casts, and by no more than bf16's
// rounding (2^-8 relative) allows.

#define BOOST_TEST_MODULE reduce_dtype
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/zero.hpp"
#include "zero/zero_strategy.hpp"

using namespace mpiaccel;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 12;  // whole batch, split over the ranks
constexpr double kLr = 0.5;

ModelSpec small_gpt() {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.n_embd = 32;
  spec.block_size = 16;
  return spec;
}

std::pair<at::Tensor, at::Tensor> batch(int step) {
  torch::manual_seed(100 + step);
  return {torch::randint(0, 256, {kBatch, 16}, torch::kLong), torch::randint(0, 256, {kBatch, 16}, torch::kLong)};
}

PrecisionPolicy policy(const std::string& param, const std::string& reduce) {
  DistributedConfig d;
  d.param_dtype = choice_named<DtypeChoice>(param, "param_dtype");
  d.reduce_dtype = choice_named<DtypeChoice>(reduce, "reduce_dtype");
  return PrecisionPolicy::from_config(d);
}

using StrategyMaker = std::function<std::unique_ptr<Strategy>(const PrecisionPolicy&)>;

std::map<std::string, StrategyMaker> strategies() {
  std::map<std::string, StrategyMaker> out;
  out["ddp"] = [](const PrecisionPolicy& p) { return make_ddp_strategy(DdpConfig{}, world_ptr(), p); };
  for (int stage : {1, 2})
    out["zero" + std::to_string(stage)] = [stage](const PrecisionPolicy& p) {
      ZeroConfig z;
      z.stage = stage;
      return make_zero_strategy(z, world_ptr(), p);
    };
  out["fsdp"] = [](const PrecisionPolicy& p) { return make_fsdp_strategy(FsdpConfig{}, world_ptr(), "fsdp", p); };
  return out;
}

/// Every parameter after training, as a single process would name it.
std::map<std::string, at::Tensor> full_params(Strategy& strategy, torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  if (strategy.name() == "fsdp") {
    for (auto& [name, tensor] : full_state_dict(strategy)) out[name] = tensor;
  } else {
    for (const auto& item : module.named_parameters()) out[item.key()] = item.value().detach().clone();
  }
  return out;
}

struct Trial {
  double loss_rel = 0;   ///< max over steps of |loss - ref| / |ref|
  double update_rel = 0; ///< max over tensors of ||Δ - Δref|| / ||Δref|| (rank 0's view)
};

/// Single-process training of the whole batch: the parameters after each run.
std::map<std::string, at::Tensor> reference(std::vector<double>& losses,
                                            std::map<std::string, at::Tensor>& initial) {
  torch::manual_seed(7);
  auto model = make_model("gpt", small_gpt());
  auto module = as_module(model);
  for (const auto& item : module->named_parameters()) initial[item.key()] = item.value().detach().clone();
  torch::optim::SGD opt(module->parameters(), torch::optim::SGDOptions(kLr));
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    opt.zero_grad();
    auto loss = model->loss(model->forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module->named_parameters()) out[item.key()] = item.value().detach().clone();
  return out;
}

Trial run(const StrategyMaker& make, const PrecisionPolicy& precision, std::unique_ptr<Strategy>* keep = nullptr) {
  static std::vector<double> ref_losses;
  static std::map<std::string, at::Tensor> initial;
  static const std::map<std::string, at::Tensor> ref = reference(ref_losses, initial);
  const int n = world().size(), rank = world().rank();
  const int64_t rows = kBatch / n;

  torch::manual_seed(rank == 0 ? 7 : 1000 + rank);  // prepare() broadcasts rank 0's weights
  auto model = make_model("gpt", small_gpt());
  auto module = as_module(model);
  auto opt = std::make_shared<torch::optim::SGD>(module->parameters(), torch::optim::SGDOptions(kLr));
  std::unique_ptr<Strategy> strategy = make(precision);
  strategy->prepare(module, opt);
  Trial trial;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    strategy->zero_grad(*opt);
    at::Tensor loss;
    {
      AutocastGuard autocast("cpu", precision.param_dtype);
      loss = model->loss(model->forward(x.narrow(0, rank * rows, rows)), y.narrow(0, rank * rows, rows));
    }
    loss.backward();
    strategy->after_backward();
    strategy->step(*opt);
    const double global = world().all_reduce_scalar(loss.item<double>(), ReduceOp::Sum) / n;
    trial.loss_rel = std::max(trial.loss_rel, std::abs(global - ref_losses[step]) / std::abs(ref_losses[step]));
  }
  const auto params = full_params(*strategy, *module);
  double worst = 0;
  for (const auto& [name, value] : params) {
    if (!ref.count(name)) continue;
    const at::Tensor delta = value.to(at::kDouble) - initial.at(name).to(at::kDouble);
    const at::Tensor ref_delta = ref.at(name).to(at::kDouble) - initial.at(name).to(at::kDouble);
    const double scale = ref_delta.norm().item<double>();
    if (scale < 1e-6) continue;  // a tensor that barely moves: its rounding noise is not the test
    worst = std::max(worst, (delta - ref_delta).norm().item<double>() / scale);
  }
  // FSDP's full state lives on rank 0 only: every rank checks rank 0's figure.
  trial.update_rel = world().all_reduce_scalar(worst, ReduceOp::Max);
  if (keep) *keep = std::move(strategy);
  return trial;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fp32_communication_reproduces_single_process) {
  at::set_num_threads(1);
  for (const auto& [name, make] : strategies()) {
    const Trial t = run(make, policy("fp32", "fp32"));
    BOOST_TEST_MESSAGE(name << " fp32: loss rel " << t.loss_rel << ", update rel " << t.update_rel);
    MPIACCEL_CHECK_ALL(t.loss_rel < 1e-5);
    MPIACCEL_CHECK_ALL(t.update_rel < 1e-3);
  }
}

BOOST_AUTO_TEST_CASE(bf16_reduction_tracks_fp32_within_bf16_rounding) {
  at::set_num_threads(1);
  for (const auto& [name, make] : strategies()) {
    const Trial t = run(make, policy("fp32", "bf16"));
    const Trial exact = run(make, policy("fp32", "fp32"));
    BOOST_TEST_MESSAGE(name << " reduce bf16: loss rel " << t.loss_rel << ", update rel " << t.update_rel
                            << " (fp32: " << exact.update_rel << ")");
    // The forward is fp32: only the gradients were rounded, to ~2^-9 each.
    MPIACCEL_CHECK_ALL(t.loss_rel < 1e-3);
    MPIACCEL_CHECK_ALL(t.update_rel < 2e-2);
    // ... and they were: well above what fp32 communication leaves.
    MPIACCEL_CHECK_ALL(t.update_rel > 3 * exact.update_rel + 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(bf16_reduction_moves_half_the_bytes) {
  at::set_num_threads(1);
  auto bytes = [](const PrecisionPolicy& p) {
    std::unique_ptr<Strategy> strategy;
    run(strategies()["ddp"], p, &strategy);
    return dynamic_cast<mpiaccel::detail::DdpStrategy&>(*strategy).reducer().reduced_bytes_per_step();
  };
  const int64_t fp32 = bytes(policy("fp32", "fp32"));
  const int64_t bf16 = bytes(policy("fp32", "bf16"));
  BOOST_TEST_MESSAGE("DDP bytes all-reduced per step: fp32 " << fp32 << ", bf16 " << bf16);
  MPIACCEL_CHECK_ALL(fp32 > 0);
  MPIACCEL_CHECK_ALL(bf16 * 2 == fp32);
}

BOOST_AUTO_TEST_CASE(fsdp_gathers_parameters_in_param_dtype) {
  at::set_num_threads(1);
  // param_dtype bf16 with fp32 reduction: the forward sees bf16-rounded
  // parameters (and autocast), the master shards stay fp32.
  const Trial t = run(strategies()["fsdp"], policy("bf16", "fp32"));
  BOOST_TEST_MESSAGE("fsdp param bf16: loss rel " << t.loss_rel << ", update rel " << t.update_rel);
  MPIACCEL_CHECK_ALL(t.loss_rel > 1e-6);
  MPIACCEL_CHECK_ALL(t.loss_rel < 2e-2);
  MPIACCEL_CHECK_ALL(t.update_rel < 1e-1);
}
