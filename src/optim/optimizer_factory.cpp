#include "optim/optimizer_factory.hpp"

#include <torch/nn/module.h>

#include <cstdlib>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/optim.hpp"

namespace mpiaccel::detail {
namespace {

// MPIACCEL_OPTIM_REFERENCE=1: torch::optim's own classes and step (PyTorch's
// fused=False), to compare a run or a benchmark with the reference arithmetic.
bool reference_step_requested() {
  const char* value = std::getenv("MPIACCEL_OPTIM_REFERENCE");
  return value != nullptr && std::string(value) == "1";
}

std::shared_ptr<torch::optim::Optimizer> make_adamw(const OptimizerConfig& config, std::vector<at::Tensor> decayed,
                                                    std::vector<at::Tensor> not_decayed) {
  auto options = torch::optim::AdamWOptions(config.lr)
                     .betas({config.betas[0], config.betas[1]})
                     .eps(config.eps)
                     .weight_decay(config.weight_decay);
  auto plain = options;
  plain.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decayed), std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(std::move(not_decayed), std::make_unique<torch::optim::AdamWOptions>(plain));
  if (reference_step_requested()) return std::make_shared<torch::optim::AdamW>(std::move(groups), options);
  return std::make_shared<AdamW>(std::move(groups), options);
}

std::shared_ptr<torch::optim::Optimizer> make_sgd(const OptimizerConfig& config, std::vector<at::Tensor> decayed,
                                                  std::vector<at::Tensor> not_decayed) {
  auto options = torch::optim::SGDOptions(config.lr).momentum(config.momentum).weight_decay(config.weight_decay);
  auto plain = options;
  plain.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decayed), std::make_unique<torch::optim::SGDOptions>(options));
  groups.emplace_back(std::move(not_decayed), std::make_unique<torch::optim::SGDOptions>(plain));
  if (reference_step_requested()) return std::make_shared<torch::optim::SGD>(std::move(groups), options);
  return std::make_shared<SGD>(std::move(groups), options);
}

}  // namespace

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& config,
                                                        torch::nn::Module& module) {
  std::vector<at::Tensor> decayed, not_decayed;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decayed : not_decayed).push_back(p);
  if (config.name == OptimizerChoice::Sgd) return make_sgd(config, std::move(decayed), std::move(not_decayed));
  return make_adamw(config, std::move(decayed), std::move(not_decayed));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mpiaccel::detail
