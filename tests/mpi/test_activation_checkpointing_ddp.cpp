// ctest: links mpiaccel; np 2 3; timeout 300
// Activation checkpointing under DDP: the parameter gradients of a
// checkpointed unit reach the main backward's AccumulateGrad nodes, where
// DDP's reducer hooks fire, so the averaged gradients and the parameters after
// a few AdamW steps are those of DDP without checkpointing (bundled GPT with
// dropout, each rank its own data, several buckets; bit-identical at np 2).
#define BOOST_TEST_MODULE activation_checkpointing_ddp
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/unit.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

struct Run {
  std::vector<double> losses;
  std::vector<std::map<std::string, at::Tensor>> grads;  ///< averaged, per step
  std::map<std::string, at::Tensor> params;              ///< after the last step
  int64_t recomputed = 0;
};

Run train(const std::string& kind, bool checkpointing, int steps) {
  ModelSpec spec;
  spec.n_layer = 3;
  spec.n_head = 2;
  spec.n_embd = 32;
  spec.block_size = 16;
  spec.hidden_size = 32;
  spec.mlp_layers = 3;
  spec.dropout = 0.1;
  at::manual_seed(1);
  std::shared_ptr<Model> model = make_model(kind, spec);
  auto module = as_module(model);
  auto optimizer = std::make_shared<torch::optim::AdamW>(module->parameters(), torch::optim::AdamWOptions(1e-2));
  DdpConfig ddp;
  ddp.bucket_cap_mb = 0.01;  // several buckets: hooks fire in an order that matters
  std::unique_ptr<Strategy> strategy = make_ddp_strategy(ddp, world_ptr());
  strategy->prepare(module, optimizer);

  Config config;
  config.fsdp.activation_checkpointing = checkpointing;
  config.fsdp.transformer_layer_cls_to_wrap = kind == "gpt" ? "DecoderLayer" : "MlpBlock";
  std::unique_ptr<ActivationCheckpointing> ac = enable_activation_checkpointing(*module, config);

  Run run;
  for (int step = 0; step < steps; ++step) {
    // Each rank its own batch and its own dropout stream, the same in both runs.
    at::manual_seed(1000 * step + world().rank());
    at::Tensor input, target;
    if (kind == "gpt") {
      input = at::randint(0, 256, {4, spec.block_size}, at::kLong);
      target = at::randint(0, 256, {4, spec.block_size}, at::kLong);
    } else {
      input = at::randn({4, 1, 28, 28});
      target = at::randint(0, 10, {4}, at::kLong);
    }
    strategy->zero_grad(*optimizer);
    strategy->set_gradient_sync(true);
    at::Tensor loss = model->loss(model->forward(input), target);
    loss.backward();
    strategy->after_backward();
    run.losses.push_back(loss.item<double>());
    std::map<std::string, at::Tensor> grads;
    for (const auto& item : module->named_parameters()) grads[item.key()] = item.value().grad().clone();
    run.grads.push_back(std::move(grads));
    strategy->step(*optimizer);
  }
  for (const auto& item : module->named_parameters()) run.params[item.key()] = item.value().detach().clone();
  if (ac) {
    run.recomputed = ac->recomputations();
    disable_activation_checkpointing(*module, *ac);
  }
  return run;
}

double max_diff(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  double worst = 0;
  for (const auto& [name, t] : a) worst = std::max(worst, (t - b.at(name)).abs().max().item<double>());
  return worst;
}

void expect_same_training(const std::string& kind, int64_t units) {
  require_world_size(2);
  const int steps = 3;
  const Run plain = train(kind, false, steps);
  const Run ckpt = train(kind, true, steps);
  double grad_diff = 0;
  for (int s = 0; s < steps; ++s) grad_diff = std::max(grad_diff, max_diff(plain.grads[s], ckpt.grads[s]));
  const double param_diff = max_diff(plain.params, ckpt.params);
  BOOST_TEST_MESSAGE(kind << " np " << world().size() << ": max |grad diff| " << grad_diff
                          << ", max |param diff| after " << steps << " AdamW steps " << param_diff);
  MPIACCEL_CHECK_ALL(plain.losses == ckpt.losses);
  // Two ranks: a sum of two is the same in any order, so equal to the bit.
  // More ranks: the order MPI adds an element in depends on its place in the
  // bucket, and the buckets are rebuilt from the order the gradient hooks
  // fired, which checkpointing changes (a unit's parameter gradients arrive
  // together, when its recomputation finishes): rounding-level differences,
  // which AdamW's normalised update turns into ~1e-6 in the parameters.
  const bool exact = world().size() == 2;
  MPIACCEL_CHECK_ALL(grad_diff <= (exact ? 0.0 : 1e-6));
  MPIACCEL_CHECK_ALL(param_diff <= (exact ? 0.0 : 5e-5));
  MPIACCEL_CHECK_ALL(ckpt.recomputed == units * steps);
  // The gradients are averaged: every rank holds the same.
  const at::Tensor& probe = ckpt.grads.back().begin()->second;
  at::Tensor mean = probe.clone();
  world().all_reduce(mean, ReduceOp::Avg);
  MPIACCEL_CHECK_ALL(at::allclose(mean, probe, 1e-6, 1e-7));
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt_ddp_same_with_and_without) { expect_same_training("gpt", 3); }

BOOST_AUTO_TEST_CASE(mlp_ddp_same_with_and_without) { expect_same_training("mlp", 3); }
