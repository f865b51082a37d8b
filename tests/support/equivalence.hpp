#pragma once
// The equivalence harness of the strategy tests: a strategy on N ranks, each
// training its B/N rows of every batch, must reproduce one process training
// the whole batch B. Every rank also trains that single-process reference
// itself (same seed, whole batch, no communication), so the comparison needs
// no extra messages: each rank holds its own reference to compare against.
//
// A Trial plugs in what varies, so a new strategy or model needs no change
// here:
//   model      how to build the module and its loss on some rows;
//   data       the whole batch of each step, the same on every rank;
//   optimizer  built over a module's parameters;
//   strategy   a StrategyPlug: the config, a factory from (config,
//              communicator) — make_strategy unless the plug brings its own,
//              as a device mesh will — and how the trained parameters are
//              read back (whole in a replicated module, as rows of
//              state_dict() where sharded).
// Stock models, batches and optimizers: support/small_models.hpp.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/strategies.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/state.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel::test {

/// Whose rows a loss is of: rank `owner`'s micro-batch `micro` of step
/// `step`. A model may branch on them (support/small_models.hpp BranchNet);
/// most ignore them.
struct Rows {
  int owner = 0;
  int step = 0;
  int micro = 0;
};

struct ModelUnderTest {
  /// A new module from LibTorch's default generator (run_trial seeds it).
  std::function<std::shared_ptr<torch::nn::Module>()> make;
  /// The loss of `module` on rows x, y.
  std::function<torch::Tensor(torch::nn::Module& module, const torch::Tensor& x,
                              const torch::Tensor& y, const Rows& rows)>
      loss;
};

/// The whole batch of a step: identical on every rank and in the reference.
using Batches = std::function<std::pair<torch::Tensor, torch::Tensor>(int step)>;
using OptimizerFactory =
    std::function<std::shared_ptr<torch::optim::Optimizer>(torch::nn::Module&)>;
using StrategyFactory =
    std::function<std::unique_ptr<Strategy>(const Config&, std::shared_ptr<Communicator>)>;

/// A trained pair and how far apart they ended.
struct TrialRun {
  std::shared_ptr<torch::nn::Module> model;  ///< trained under the strategy
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Strategy> strategy;
  std::shared_ptr<torch::nn::Module> reference;  ///< trained in one process
  std::shared_ptr<torch::optim::Optimizer> reference_optimizer;
  double max_loss_rel = 0;  ///< over steps, |strategy - ref| / |ref| of the mean loss
  double max_norm_rel = 0;  ///< over steps, grad_norm() against the reference's (Trial::compare_grad_norm)
  bool checks_ok = true;    ///< every Trial::check passed
  // What the plug's compare fills:
  double max_param_rel = 0;  ///< compare_replicas: over tensors, ||p - ref|| / ||ref||
  std::string worst_param;   ///< ... and the tensor of it
  double max_shard_rel = 0;  ///< compare_shard_rows: this rank's rows against the reference's
  double max_full_rel = 0;   ///< compare_fsdp: the gathered model (rank 0; others 0)
  int64_t compared = 0;      ///< compare_shard_rows: tensors compared
};

/// Reads the trained parameters back and compares them with the reference's.
using Compare = std::function<void(TrialRun&, Communicator&)>;

/// ||a - b|| / ||scale||: `scale` is the whole reference tensor, so rows that
/// are rounding noise in both (a key bias, whose gradient is exactly zero in
/// theory) do not count as large relative differences.
inline double rel_diff(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& scale) {
  if (a.numel() == 0) return 0.0;
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         (scale.to(torch::kDouble).norm().item<double>() + 1e-30);
}
inline double rel_diff(const torch::Tensor& a, const torch::Tensor& b) { return rel_diff(a, b, b); }

/// The reference's rows for each "model/<fqn>" tensor of `dict`, relative to
/// the whole reference tensor.
inline double max_rows_diff(const ShardedStateDict& dict, torch::nn::Module& reference,
                            int64_t* compared) {
  auto params = reference.named_parameters();
  double worst = 0;
  for (const ShardedTensor& t : dict.tensors) {
    if (t.name.rfind("model/", 0) != 0) continue;
    const std::string fqn = t.name.substr(6);
    if (!params.contains(fqn)) continue;
    torch::Tensor full = params[fqn].detach();
    if (full.dim() == 0) full = full.reshape({1});
    worst = std::max(worst, rel_diff(t.local, full.narrow(0, t.row_begin, t.row_count), full));
    if (compared) ++*compared;
  }
  return worst;
}

/// Replicated strategies (DDP, ZeRO): the module's own tensors are the whole,
/// current parameters.
inline void compare_replicas(TrialRun& run, Communicator&) {
  auto ref_params = run.reference->named_parameters();
  for (const auto& item : run.model->named_parameters()) {
    const auto& r = ref_params[item.key()];
    const double rel = (item.value() - r).norm().item<double>() / (r.norm().item<double>() + 1e-30);
    if (rel >= run.max_param_rel) {
      run.max_param_rel = rel;
      run.worst_param = item.key();
    }
  }
}

/// Sharded strategies: this rank's rows of state_dict(), the strategy-neutral
/// description every strategy gives, against the reference's rows.
inline void compare_shard_rows(TrialRun& run, Communicator&) {
  run.max_shard_rel = max_rows_diff(run.strategy->state_dict(*run.optimizer), *run.reference,
                                    &run.compared);
}

/// FSDP: the shard rows, and the whole model full_state_dict() gathers to rank 0.
inline void compare_fsdp(TrialRun& run, Communicator& comm) {
  compare_shard_rows(run, comm);
  auto full = full_state_dict(*run.strategy);
  auto ref_params = run.reference->named_parameters();
  for (const auto& [name, tensor] : full)
    if (ref_params.contains(name))
      run.max_full_rel = std::max(run.max_full_rel, rel_diff(tensor, ref_params[name].detach()));
  MPIACCEL_CHECK(comm.rank() != 0 || full.size() >= ref_params.size(),
                 "full_state_dict returned " + std::to_string(full.size()) + " tensors");
}

/// The strategy a trial runs: its config ([distributed] strategy and its
/// section), how to build it, and how to read back what it trained.
struct StrategyPlug {
  Config config;
  StrategyFactory make = make_strategy;
  Compare compare = compare_replicas;
};

inline StrategyPlug ddp_plug(const DdpConfig& ddp) {
  StrategyPlug plug;
  plug.config.distributed.strategy = mpiaccel::StrategyChoice::Ddp;
  plug.config.ddp = ddp;
  return plug;
}

inline StrategyPlug fsdp_plug(const FsdpConfig& fsdp) {
  StrategyPlug plug;
  plug.config.distributed.strategy = mpiaccel::StrategyChoice::Fsdp;
  plug.config.fsdp = fsdp;
  plug.compare = compare_fsdp;
  return plug;
}

/// Stages 1 and 2 (make_strategy routes 0 to DDP and 3 to FSDP).
inline StrategyPlug zero_plug(const ZeroConfig& zero) {
  StrategyPlug plug;
  plug.config.distributed.strategy = mpiaccel::StrategyChoice::Zero;
  plug.config.zero = zero;
  return plug;
}

inline FsdpConfig fsdp_config(const std::string& policy, const std::string& classes = "",
                              bool reshard = true) {
  FsdpConfig c;
  c.auto_wrap_policy = mpiaccel::choice_named<mpiaccel::WrapPolicy>(policy, "auto_wrap_policy");
  if (!classes.empty()) c.transformer_layer_cls_to_wrap = classes;
  c.reshard_after_forward = reshard;
  return c;
}

inline ZeroConfig zero_config(int stage, bool offload, double reduce_mb = 25, double gather_mb = 25) {
  ZeroConfig c;
  c.stage = stage;
  c.offload_optimizer = offload ? mpiaccel::OffloadChoice::Cpu : mpiaccel::OffloadChoice::None;
  c.reduce_bucket_mb = reduce_mb;
  c.allgather_bucket_mb = gather_mb;
  return c;
}

struct Trial {
  ModelUnderTest model;
  Batches data;
  OptimizerFactory optimizer;
  StrategyPlug strategy;
  int steps = 10;
  int accum = 1;  ///< micro-batches per step (no_sync on all but the last)
  /// With accum 1, the reference runs the whole batch in one forward instead
  /// of rank by rank: the same sum, rounded otherwise. Not for a model that
  /// branches per rank (Rows::owner).
  bool reference_one_forward = false;
  /// Zero the gradients with LibTorch's Module::zero_grad() instead of the strategy's.
  bool zero_with_module = false;
  /// Compare the strategy's grad_norm() with the reference's every step.
  bool compare_grad_norm = false;
  /// Called on the strategy's model after each step's backward (before the
  /// optimizer step); false marks the run (TrialRun::checks_ok).
  std::function<bool(torch::nn::Module&, int step)> check;
};

inline double global_grad_norm(torch::nn::Module& module) {
  double sum = 0;
  for (const auto& p : module.parameters())
    if (p.grad().defined()) sum += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sum);
}

/// Trains the reference and then the strategy for trial.steps steps, and
/// compares them. Collective over comm: every rank calls it, in the same order.
inline TrialRun run_trial(const Trial& trial, const std::shared_ptr<Communicator>& comm) {
  // One thread a rank: the ranks share the cores.
  at::set_num_threads(1);
  const int n = comm->size(), rank = comm->rank(), k = trial.accum;
  const auto& loss_of = trial.model.loss;
  TrialRun run;

  // The reference: one process, the whole batch; rank by rank in the same
  // micro-batches as the strategy, so the sums match.
  torch::manual_seed(7);
  run.reference = trial.model.make();
  run.reference_optimizer = trial.optimizer(*run.reference);
  std::vector<double> ref_losses, ref_norms;
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = trial.data(step);
    run.reference_optimizer->zero_grad();
    double total = 0;
    if (trial.reference_one_forward && k == 1) {
      auto loss = loss_of(*run.reference, x, y, {0, step, 0});
      loss.backward();
      total = loss.item<double>();
    } else {
      // Rank r's micro-batch m is rows chunk(r)[chunk(m)].
      const int64_t rows = x.size(0) / (n * k);
      for (int r = 0; r < n; ++r)
        for (int m = 0; m < k; ++m) {
          const int64_t begin = (r * k + m) * rows;
          auto loss = loss_of(*run.reference, x.narrow(0, begin, rows), y.narrow(0, begin, rows),
                              {r, step, m}) /
                      (n * k);
          loss.backward();
          total += loss.item<double>();
        }
    }
    if (trial.compare_grad_norm) ref_norms.push_back(global_grad_norm(*run.reference));
    run.reference_optimizer->step();
    ref_losses.push_back(total);
  }

  // The strategy: ranks other than 0 start from other weights, so prepare()
  // must broadcast rank 0's (or shard them).
  torch::manual_seed(rank == 0 ? 7 : 1000 + rank);
  run.model = trial.model.make();
  run.optimizer = trial.optimizer(*run.model);
  run.strategy = trial.strategy.make(trial.strategy.config, comm);
  run.strategy->prepare(run.model, run.optimizer);
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = trial.data(step);
    const int64_t rows = x.size(0) / (n * k);
    if (trial.zero_with_module) run.model->zero_grad();
    else run.strategy->zero_grad(*run.optimizer);
    double local = 0;
    for (int m = 0; m < k; ++m) {
      run.strategy->set_gradient_sync(m == k - 1);
      const int64_t begin = (rank * k + m) * rows;
      auto loss =
          loss_of(*run.model, x.narrow(0, begin, rows), y.narrow(0, begin, rows), {rank, step, m}) / k;
      loss.backward();
      run.strategy->after_backward();
      local += loss.item<double>();
    }
    if (trial.check && !trial.check(*run.model, step)) run.checks_ok = false;
    if (trial.compare_grad_norm) {
      const double norm = run.strategy->grad_norm();
      run.max_norm_rel = std::max(run.max_norm_rel, std::abs(norm - ref_norms[step]) / ref_norms[step]);
    }
    run.strategy->step(*run.optimizer);
    const double global = comm->all_reduce_scalar(local, ReduceOp::Sum) / n;
    run.max_loss_rel =
        std::max(run.max_loss_rel, std::abs(global - ref_losses[step]) / std::abs(ref_losses[step]));
  }
  trial.strategy.compare(run, *comm);
  return run;
}

}  // namespace mpiaccel::test
