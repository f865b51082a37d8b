#pragma once
// The models, batches and optimizers the strategy tests train, as plugs of the
// equivalence harness (support/equivalence.hpp): small test nets (an MLP, a
// GPT-style block, a net with a branch some ranks skip) and the bundled
// models (make_model) at a small size.

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/models.hpp"
#include "support/equivalence.hpp"

namespace mpiaccel::test {

// ---- small test nets

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

/// A TestNet as the harness's model.
inline ModelUnderTest test_net(std::function<std::shared_ptr<TestNet>()> make) {
  ModelUnderTest model;
  model.make = [make] { return std::shared_ptr<torch::nn::Module>(make()); };
  model.loss = [](torch::nn::Module& module, const torch::Tensor& x, const torch::Tensor& y,
                  const Rows& rows) {
    return static_cast<TestNet&>(module).loss(x, y, rows.owner, rows.step, rows.micro);
  };
  return model;
}

/// Random rows of these shapes for step `step`: the same on every rank and in the reference.
inline Batches random_batches(std::vector<int64_t> x_shape, std::vector<int64_t> y_shape) {
  return [x_shape, y_shape](int step) {
    torch::manual_seed(100 + step);
    auto x = torch::randn(x_shape);
    auto y = torch::randn(y_shape);
    return std::make_pair(x, y);
  };
}

// ---- the bundled models (make_model), small

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

/// The bundled model `kind` at small_spec(kind), as the harness's model.
inline ModelUnderTest bundled(const std::string& kind) {
  ModelUnderTest model;
  model.make = [kind] { return as_module(make_model(kind, small_spec(kind))); };
  model.loss = [](torch::nn::Module& module, const torch::Tensor& x, const torch::Tensor& y,
                  const Rows&) {
    // Every bundled model is both a Module and a Model.
    auto& m = dynamic_cast<Model&>(module);
    return m.loss(m.forward(x), y);
  };
  return model;
}

/// The whole batch (`rows` rows) of step `step` for the bundled model `kind`:
/// GPT token sequences of 16, or Fashion-MNIST-shaped images and labels.
inline std::pair<torch::Tensor, torch::Tensor> bundled_batch(const std::string& kind, int step,
                                                             int64_t rows) {
  torch::manual_seed(100 + step);
  if (kind == "gpt")
    return {torch::randint(0, 256, {rows, 16}, torch::kLong),
            torch::randint(0, 256, {rows, 16}, torch::kLong)};
  return {torch::randn({rows, 1, 28, 28}), torch::randint(0, 10, {rows}, torch::kLong)};
}

inline Batches bundled_batches(const std::string& kind, int64_t rows) {
  return [kind, rows](int step) { return bundled_batch(kind, step, rows); };
}

/// A trial of the bundled model `kind` on `rows` rows a step (strategy: set it).
inline Trial bundled_trial(const std::string& kind, OptimizerFactory optimizer, int64_t rows) {
  Trial t;
  t.model = bundled(kind);
  t.data = bundled_batches(kind, rows);
  t.optimizer = std::move(optimizer);
  return t;
}

// ---- optimizers

/// One group over every parameter: "sgd" (lr 0.05, momentum 0.9) or "adamw" (lr 1e-2).
inline OptimizerFactory one_group(const std::string& kind) {
  return [kind](torch::nn::Module& module) -> std::shared_ptr<torch::optim::Optimizer> {
    if (kind == "adamw")
      return std::make_shared<torch::optim::AdamW>(module.parameters(), torch::optim::AdamWOptions(1e-2));
    return std::make_shared<torch::optim::SGD>(module.parameters(),
                                               torch::optim::SGDOptions(0.05).momentum(0.9));
  };
}

/// Two groups as the trainer builds them: matrices decay, vectors do not.
/// "sgd" (lr 0.05, momentum 0.9, decay 0.01) or "adamw" (lr 1e-2, decay 0.1).
inline OptimizerFactory decay_groups(const std::string& kind) {
  return [kind](torch::nn::Module& module) -> std::shared_ptr<torch::optim::Optimizer> {
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
  };
}

/// AdamW with weight decay, so the decoupled decay is exercised too. eps 1e-5:
/// some GPT gradients are (nearly) zero — the biases start at zero, the
/// attention key bias has an exactly-zero gradient in exact arithmetic — and
/// AdamW normalises their rounding noise (which differs with the summation
/// order and, at np 3, with scaling by 1/3 on the gradient instead of the
/// loss) up to full-size steps with a tiny eps, in the reference and ZeRO
/// alike but differently. With 1e-5 the worst tensor differs by ~2e-6 at np 3.
inline OptimizerFactory adamw_small_eps() {
  return [](torch::nn::Module& module) -> std::shared_ptr<torch::optim::Optimizer> {
    return std::make_shared<torch::optim::AdamW>(
        module.parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.05).eps(1e-5));
  };
}

}  // namespace mpiaccel::test
