#pragma once
// The ZeRO equivalence harness (tests/mpi/test_zero*.cpp): ZeRO on N ranks
// with per-rank batch B/N must reproduce single-process training with batch
// B. Every rank also trains the single-process reference itself (same seed,
// whole batch, no communication), as the DDP tests do, so checking needs no
// extra messages. Models: the bundled GPT and MLP (make_model).

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/zero.hpp"
#include "zero/zero_strategy.hpp"

namespace mpiaccel::test {

inline ModelSpec zero_spec(const std::string& kind) {
  ModelSpec spec;
  if (kind == "gpt") {
    spec.n_layer = 2;
    spec.n_head = 2;
    spec.n_embd = 32;
    spec.block_size = 16;
  } else {
    spec.hidden_size = 32;
    spec.mlp_layers = 2;
  }
  return spec;
}

inline std::shared_ptr<Model> seeded_model(const std::string& kind, uint64_t seed) {
  torch::manual_seed(seed);
  return make_model(kind, zero_spec(kind));
}

/// The whole batch of step `step`: the same on every rank and in the reference.
inline std::pair<at::Tensor, at::Tensor> zero_batch(const std::string& kind, int64_t rows, int step) {
  torch::manual_seed(100 + step);
  if (kind == "gpt")
    return {torch::randint(0, 256, {rows, 16}, torch::kLong), torch::randint(0, 256, {rows, 16}, torch::kLong)};
  return {torch::randn({rows, 1, 28, 28}), torch::randint(0, 10, {rows}, torch::kLong)};
}

/// AdamW with weight decay, so the decoupled decay is exercised too. eps 1e-5:
/// some GPT gradients are (nearly) zero — the biases start at zero, the
/// attention key bias has an exactly-zero gradient in exact arithmetic — and
/// AdamW normalises their rounding noise (which differs with the summation
/// order and, at np 3, with scaling by 1/3 on the gradient instead of the
/// loss) up to full-size steps with a tiny eps, in the reference and ZeRO
/// alike but differently. With 1e-5 the worst tensor differs by ~2e-6 at np 3.
inline std::shared_ptr<torch::optim::AdamW> zero_optimizer(torch::nn::Module& module) {
  return std::make_shared<torch::optim::AdamW>(
      module.parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.05).eps(1e-5));
}

struct ZeroTrial {
  std::string model = "mlp";
  ZeroConfig zero;
  int steps = 10;
  int accum = 1;
  int64_t rows_per_micro = 12;  // whole batch = rows_per_micro · accum, split over the ranks
};

struct ZeroResult {
  double max_loss_rel = 0;   // over steps, |zero - ref| / |ref|
  double max_param_rel = 0;  // over tensors, ||zero - ref|| / ||ref||
  double max_norm_rel = 0;   // over steps, grad_norm() against the reference's
  std::string worst_param;   // the tensor of max_param_rel
};

inline double global_grad_norm(torch::nn::Module& module) {
  double sum = 0;
  for (const auto& p : module.parameters())
    if (p.grad().defined()) sum += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sum);
}

inline ZeroResult run_zero_trial(Communicator& comm, std::shared_ptr<Communicator> comm_ptr,
                                 const ZeroTrial& trial,
                                 std::unique_ptr<detail::ZeroStrategy>* keep = nullptr,
                                 std::shared_ptr<torch::optim::AdamW>* keep_optimizer = nullptr,
                                 std::shared_ptr<Model>* keep_model = nullptr) {
  at::set_num_threads(1);
  const int n = comm.size(), rank = comm.rank(), k = trial.accum;
  const int64_t total_rows = trial.rows_per_micro * k;
  const int64_t rows = total_rows / (n * k);

  // Reference: one process, whole batch in the same micro-batch chunks.
  auto ref = seeded_model(trial.model, 7);
  auto ref_opt = zero_optimizer(ref->module());
  std::vector<double> ref_losses, ref_norms;
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = zero_batch(trial.model, total_rows, step);
    ref_opt->zero_grad();
    double total = 0;
    for (int r = 0; r < n; ++r)
      for (int m = 0; m < k; ++m) {
        const int64_t begin = (r * k + m) * rows;
        auto loss = ref->loss(ref->forward(x.narrow(0, begin, rows)), y.narrow(0, begin, rows)) / (n * k);
        loss.backward();
        total += loss.item<double>();
      }
    ref_norms.push_back(global_grad_norm(ref->module()));
    ref_opt->step();
    ref_losses.push_back(total);
  }

  // ZeRO: ranks other than 0 start from different weights; prepare() must
  // broadcast rank 0's.
  auto model = seeded_model(trial.model, rank == 0 ? 7 : 1000 + rank);
  auto module = as_module(model);
  auto opt = zero_optimizer(*module);
  auto strategy = std::make_unique<detail::ZeroStrategy>(trial.zero, comm_ptr);
  strategy->prepare(module, opt);
  ZeroResult result;
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = zero_batch(trial.model, total_rows, step);
    strategy->zero_grad(*opt);
    double local = 0;
    for (int m = 0; m < k; ++m) {
      strategy->set_gradient_sync(m == k - 1);
      const int64_t begin = (rank * k + m) * rows;
      auto loss = model->loss(model->forward(x.narrow(0, begin, rows)), y.narrow(0, begin, rows)) / k;
      loss.backward();
      strategy->after_backward();
      local += loss.item<double>();
    }
    const double norm = strategy->grad_norm();
    result.max_norm_rel = std::max(result.max_norm_rel, std::abs(norm - ref_norms[step]) / ref_norms[step]);
    strategy->step(*opt);
    const double global = comm.all_reduce_scalar(local, ReduceOp::Sum) / n;
    result.max_loss_rel =
        std::max(result.max_loss_rel, std::abs(global - ref_losses[step]) / std::abs(ref_losses[step]));
  }
  auto ref_params = ref->module().named_parameters();
  for (const auto& item : module->named_parameters()) {
    const auto& r = ref_params[item.key()];
    const double rel = (item.value() - r).norm().item<double>() / (r.norm().item<double>() + 1e-30);
    if (rel >= result.max_param_rel) {
      result.max_param_rel = rel;
      result.worst_param = item.key();
    }
  }
  if (keep) *keep = std::move(strategy);
  if (keep_optimizer) *keep_optimizer = opt;
  if (keep_model) *keep_model = model;
  return result;
}

inline ZeroConfig zero_config(int stage, bool offload, double reduce_mb = 25, double gather_mb = 25) {
  ZeroConfig c;
  c.stage = stage;
  c.offload_optimizer = offload ? "cpu" : "none";
  c.reduce_bucket_mb = reduce_mb;
  c.allgather_bucket_mb = gather_mb;
  return c;
}

}  // namespace mpiaccel::test
