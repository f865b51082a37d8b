#pragma once
// The FSDP equivalence harness: FSDP on N ranks with per-rank batch B/N must
// reproduce single-process training with batch B on the bundled models. Every
// rank also trains the single-process reference itself (same seed, whole
// batch, no communication), so the check needs no extra messages: each rank
// compares its own shard rows (from state_dict()) and rank 0 the gathered full
// model (full_state_dict()) against the reference.

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel::test {

inline ModelSpec small_spec(const std::string& kind) {
  ModelSpec spec;
  if (kind == "gpt") {
    spec.n_layer = 2;
    spec.n_embd = 32;
    spec.n_head = 2;
    spec.block_size = 16;
  } else {
    spec.hidden_size = 32;
    spec.mlp_layers = 2;
  }
  return spec;
}

/// The whole batch of step `step`, identical on every rank.
inline std::pair<torch::Tensor, torch::Tensor> batch_of(const std::string& kind, int step,
                                                        int64_t batch) {
  torch::manual_seed(100 + step);
  if (kind == "gpt") {
    auto x = torch::randint(0, 256, {batch, 16}, torch::kLong);
    auto y = torch::randint(0, 256, {batch, 16}, torch::kLong);
    return {x, y};
  }
  auto x = torch::randn({batch, 1, 28, 28});
  auto y = torch::randint(0, 10, {batch}, torch::kLong);
  return {x, y};
}

/// Two groups as the trainer builds them: matrices decay, vectors do not.
inline std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& kind,
                                                               torch::nn::Module& module) {
  std::vector<torch::Tensor> decayed, plain;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (kind == "adamw") {
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                     torch::optim::AdamWOptions(1e-2).weight_decay(0.1)));
    groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(1e-2).weight_decay(0.0)));
    return std::make_shared<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(1e-2));
  }
  groups.emplace_back(decayed, std::make_unique<torch::optim::SGDOptions>(
                                   torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01)));
  groups.emplace_back(plain, std::make_unique<torch::optim::SGDOptions>(
                                 torch::optim::SGDOptions(0.05).momentum(0.9)));
  return std::make_shared<torch::optim::SGD>(groups, torch::optim::SGDOptions(0.05));
}

inline FsdpConfig fsdp_config(const std::string& policy, const std::string& classes = "",
                              bool reshard = true) {
  FsdpConfig c;
  c.auto_wrap_policy = policy;
  if (!classes.empty()) c.transformer_layer_cls_to_wrap = classes;
  c.reshard_after_forward = reshard;
  return c;
}

struct FsdpTrial {
  std::string model = "gpt";       // gpt | mlp
  std::string optimizer = "sgd";   // sgd | adamw
  FsdpConfig fsdp;
  int steps = 10;
  int accum = 1;
  int64_t batch = 24;
};

struct FsdpRun {
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Strategy> strategy;
  std::shared_ptr<Model> reference;
  std::shared_ptr<torch::optim::Optimizer> reference_optimizer;
  double max_loss_rel = 0;   ///< over steps, |fsdp - ref| / |ref|
  double max_shard_rel = 0;  ///< this rank's shard rows against the reference's
  double max_full_rel = 0;   ///< the gathered model against the reference (rank 0; others 0)
  int64_t compared = 0;      ///< parameters compared
};

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

/// Trains the reference and the FSDP model for trial.steps steps.
inline FsdpRun run_fsdp_trial(Communicator& comm, std::shared_ptr<Communicator> comm_ptr,
                              const FsdpTrial& trial) {
  const int n = comm.size(), rank = comm.rank(), k = trial.accum;
  const std::string opt_kind = trial.optimizer;
  FsdpRun run;

  torch::manual_seed(7);
  run.reference = make_model(trial.model, small_spec(trial.model));
  run.reference_optimizer = make_optimizer(opt_kind, run.reference->module());
  std::vector<double> ref_losses;
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = batch_of(trial.model, step, trial.batch);
    run.reference_optimizer->zero_grad();
    double total = 0;
    // The same micro-batches FSDP sees, rank by rank, so sums match.
    const int64_t rows = trial.batch / (n * k);
    for (int r = 0; r < n; ++r)
      for (int m = 0; m < k; ++m) {
        const int64_t begin = (r * k + m) * rows;
        auto loss = run.reference->loss(run.reference->forward(x.narrow(0, begin, rows)),
                                        y.narrow(0, begin, rows)) /
                    (n * k);
        loss.backward();
        total += loss.item<double>();
      }
    run.reference_optimizer->step();
    ref_losses.push_back(total);
  }

  // Ranks other than 0 start from other weights: prepare() must broadcast rank 0's.
  torch::manual_seed(rank == 0 ? 7 : 1000 + rank);
  run.model = make_model(trial.model, small_spec(trial.model));
  run.optimizer = make_optimizer(opt_kind, run.model->module());
  run.strategy = make_fsdp_strategy(trial.fsdp, comm_ptr);
  run.strategy->prepare(as_module(run.model), run.optimizer);
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = batch_of(trial.model, step, trial.batch);
    const int64_t rows = trial.batch / (n * k);
    run.strategy->zero_grad(*run.optimizer);
    double local = 0;
    for (int m = 0; m < k; ++m) {
      run.strategy->set_gradient_sync(m == k - 1);
      const int64_t begin = (rank * k + m) * rows;
      auto loss = run.model->loss(run.model->forward(x.narrow(0, begin, rows)),
                                  y.narrow(0, begin, rows)) /
                  k;
      loss.backward();
      run.strategy->after_backward();
      local += loss.item<double>();
    }
    run.strategy->step(*run.optimizer);
    const double global = comm.all_reduce_scalar(local, ReduceOp::Sum) / n;
    run.max_loss_rel = std::max(run.max_loss_rel,
                                std::abs(global - ref_losses[step]) / std::abs(ref_losses[step]));
  }
  run.max_shard_rel = max_rows_diff(run.strategy->state_dict(*run.optimizer),
                                    run.reference->module(), &run.compared);
  auto full = full_state_dict(*run.strategy);
  auto ref_params = run.reference->module().named_parameters();
  for (const auto& [name, tensor] : full)
    if (ref_params.contains(name))
      run.max_full_rel = std::max(run.max_full_rel, rel_diff(tensor, ref_params[name].detach()));
  MPIACCEL_CHECK(rank != 0 || full.size() >= ref_params.size(),
                 "full_state_dict returned " + std::to_string(full.size()) + " tensors");
  return run;
}

}  // namespace mpiaccel::test
