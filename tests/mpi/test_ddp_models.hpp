#pragma once
// Small models and the equivalence harness shared by the DDP tests: DDP on N
// ranks with per-rank batch B/N must reproduce single-process training with
// batch B. Every rank also trains the single-process reference itself (same
// seed, whole batch, no communication), so checking needs no extra messages.

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/ddp.hpp"

namespace mpiaccel::test {

/// A model with a loss over rows of a batch. `owner` (the rank that owns the
/// rows), `step` and `micro` let a model take branches per rank and step.
struct TestNet : torch::nn::Module {
  virtual torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y, int owner, int step,
                             int micro) = 0;
};

struct Mlp : TestNet {
  Mlp(int64_t in, int64_t hidden, int64_t out, int layers) {
    int64_t width = in;
    for (int i = 0; i < layers; ++i) {
      fcs.push_back(register_module("fc" + std::to_string(i),
                                    torch::nn::Linear(width, i + 1 == layers ? out : hidden)));
      width = hidden;
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < fcs.size(); ++i) {
      x = fcs[i]->forward(x);
      if (i + 1 < fcs.size()) x = torch::tanh(x);
    }
    return x;
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y, int, int, int) override {
    return torch::mse_loss(forward(x), y);
  }
  std::vector<torch::nn::Linear> fcs;
};

/// A pre-LN causal self-attention block plus MLP, GPT-style, on [B, T, D].
struct TinyBlock : TestNet {
  static constexpr int64_t kT = 4, kD = 8;
  TinyBlock() {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kD})));
    // No qkv bias: the key bias gets an exactly-zero gradient (softmax is
    // shift invariant), and AdamW would amplify its rounding noise into
    // full-size steps, in the reference and DDP alike.
    qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(kD, 3 * kD).bias(false)));
    proj = register_module("proj", torch::nn::Linear(kD, kD));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kD})));
    fc = register_module("fc", torch::nn::Linear(kD, 4 * kD));
    out = register_module("out", torch::nn::Linear(4 * kD, kD));
    head = register_module("head", torch::nn::Linear(kD, 3));
    register_buffer("mask", torch::ones({kT, kT}).tril());
  }
  torch::Tensor forward(torch::Tensor x) {
    auto parts = qkv->forward(ln1->forward(x)).chunk(3, -1);
    auto att = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(double(kD));
    att = att.masked_fill(named_buffers()["mask"] == 0, -1e9).softmax(-1);
    x = x + proj->forward(torch::matmul(att, parts[2]));
    x = x + out->forward(torch::gelu(fc->forward(ln2->forward(x))));
    return head->forward(x.mean(1));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y, int, int, int) override {
    return torch::mse_loss(forward(x), y);
  }
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, out{nullptr}, head{nullptr};
};

/// A trunk, a branch taken only when use_branch(owner, step, micro) says so,
/// and a layer never used at all.
struct BranchNet : TestNet {
  explicit BranchNet(std::function<bool(int, int, int)> use) : use_branch(std::move(use)) {
    trunk = register_module("trunk", torch::nn::Linear(8, 16));
    branch = register_module("branch", torch::nn::Linear(16, 16));
    never = register_module("never", torch::nn::Linear(16, 16));
    head = register_module("head", torch::nn::Linear(16, 4));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y, int owner, int step,
                     int micro) override {
    auto h = torch::tanh(trunk->forward(x));
    if (use_branch(owner, step, micro)) h = h + torch::tanh(branch->forward(h));
    return torch::mse_loss(head->forward(h), y);
  }
  std::function<bool(int, int, int)> use_branch;
  torch::nn::Linear trunk{nullptr}, branch{nullptr}, never{nullptr}, head{nullptr};
};

struct Trial {
  std::function<std::shared_ptr<TestNet>()> make;
  std::function<std::pair<torch::Tensor, torch::Tensor>(int step)> data;  // whole batch
  DdpConfig ddp;
  std::string optimizer = "sgd";  // sgd (momentum 0.9) | adamw
  int steps = 10;
  int accum = 1;
  bool per_owner = false;  // reference computes the loss per rank chunk (branchy models)
  /// Zero the gradients with LibTorch's Module::zero_grad() instead of the strategy's.
  bool zero_with_module = false;
  /// Called on the DDP model after each step's backward (before the optimizer step).
  std::function<bool(TestNet&, int step)> check;
};

struct TrialResult {
  double max_loss_rel = 0;   // over steps, |ddp - ref| / |ref|
  double max_param_rel = 0;  // over tensors, ||ddp - ref|| / ||ref||
  bool checks_ok = true;
  std::shared_ptr<torch::optim::Optimizer> optimizer;  // the DDP side's, after the steps
};

inline std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& kind,
                                                               TestNet& model) {
  if (kind == "adamw")
    return std::make_shared<torch::optim::AdamW>(model.parameters(),
                                                 torch::optim::AdamWOptions(1e-2));
  return std::make_shared<torch::optim::SGD>(model.parameters(),
                                             torch::optim::SGDOptions(0.05).momentum(0.9));
}

inline std::shared_ptr<TestNet> seeded(const Trial& trial, uint64_t seed) {
  torch::manual_seed(seed);
  return trial.make();
}

inline TrialResult run_trial(Communicator& comm, std::shared_ptr<Communicator> comm_ptr,
                             const Trial& trial, detail::DdpStrategy** out_strategy = nullptr,
                             std::unique_ptr<Strategy>* keep = nullptr) {
  const int n = comm.size(), rank = comm.rank(), k = trial.accum;

  // Reference: one process, whole batch, no communication.
  std::vector<double> ref_losses;
  auto ref = seeded(trial, 7);
  auto ref_opt = make_optimizer(trial.optimizer, *ref);
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = trial.data(step);
    ref_opt->zero_grad();
    double total = 0;
    if (!trial.per_owner && k == 1) {
      auto loss = ref->loss(x, y, 0, step, 0);
      loss.backward();
      total = loss.item<double>();
    } else {
      // Rank r's micro-batch m is rows chunk(r)[chunk(m)]: the same rows DDP uses.
      const int64_t rows = x.size(0) / (n * k);
      for (int r = 0; r < n; ++r)
        for (int m = 0; m < k; ++m) {
          const int64_t begin = (r * k + m) * rows;
          auto loss = ref->loss(x.narrow(0, begin, rows), y.narrow(0, begin, rows),
                                trial.per_owner ? r : 0, step, m) /
                      (n * k);
          loss.backward();
          total += loss.item<double>();
        }
    }
    ref_opt->step();
    ref_losses.push_back(total);
  }

  // DDP: ranks other than 0 start from different weights; prepare() must
  // broadcast rank 0's.
  auto model = seeded(trial, rank == 0 ? 7 : 1000 + rank);
  auto opt = make_optimizer(trial.optimizer, *model);
  auto strategy = std::make_unique<detail::DdpStrategy>(trial.ddp, comm_ptr);
  strategy->prepare(model, opt);
  TrialResult result;
  for (int step = 0; step < trial.steps; ++step) {
    auto [x, y] = trial.data(step);
    const int64_t rows = x.size(0) / (n * k);
    if (trial.zero_with_module) model->zero_grad();
    else strategy->zero_grad(*opt);
    double local = 0;
    for (int m = 0; m < k; ++m) {
      strategy->set_gradient_sync(m == k - 1);
      const int64_t begin = (rank * k + m) * rows;
      auto loss = model->loss(x.narrow(0, begin, rows), y.narrow(0, begin, rows), rank, step, m) / k;
      loss.backward();
      strategy->after_backward();
      local += loss.item<double>();
    }
    if (trial.check && !trial.check(*model, step)) result.checks_ok = false;
    strategy->step(*opt);
    const double global = comm.all_reduce_scalar(local, ReduceOp::Sum) / n;
    result.max_loss_rel =
        std::max(result.max_loss_rel, std::abs(global - ref_losses[step]) / std::abs(ref_losses[step]));
  }
  auto ref_params = ref->named_parameters();
  for (const auto& item : model->named_parameters()) {
    const auto& r = ref_params[item.key()];
    const double rel = (item.value() - r).norm().item<double>() / (r.norm().item<double>() + 1e-30);
    result.max_param_rel = std::max(result.max_param_rel, rel);
  }
  result.optimizer = opt;
  if (out_strategy) *out_strategy = strategy.get();
  if (keep) *keep = std::move(strategy);
  return result;
}

/// Rows for step `step`: the same on every rank and in the reference.
inline std::function<std::pair<torch::Tensor, torch::Tensor>(int)> batch_data(
    std::vector<int64_t> x_shape, std::vector<int64_t> y_shape) {
  return [x_shape, y_shape](int step) {
    torch::manual_seed(100 + step);
    auto x = torch::randn(x_shape);
    auto y = torch::randn(y_shape);
    return std::make_pair(x, y);
  };
}

}  // namespace mpiaccel::test
