#include "optim/optimizer_factory.hpp"

#include <torch/nn/module.h>

#include "mpiaccel/error.hpp"
#include "mpiaccel/optim.hpp"

namespace mpiaccel::detail {

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& config,
                                                        torch::nn::Module& module) {
  std::vector<at::Tensor> decayed, not_decayed;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decayed : not_decayed).push_back(p);
  if (config.name == "adamw") {
    auto options = torch::optim::AdamWOptions(config.lr)
                       .betas({config.betas[0], config.betas[1]})
                       .eps(config.eps)
                       .weight_decay(config.weight_decay);
    auto plain = options;
    plain.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
    groups.emplace_back(not_decayed, std::make_unique<torch::optim::AdamWOptions>(plain));
    return std::make_shared<AdamW>(std::move(groups), options);
  }
  if (config.name == "sgd") {
    auto options =
        torch::optim::SGDOptions(config.lr).momentum(config.momentum).weight_decay(config.weight_decay);
    auto plain = options;
    plain.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::SGDOptions>(options));
    groups.emplace_back(not_decayed, std::make_unique<torch::optim::SGDOptions>(plain));
    return std::make_shared<SGD>(std::move(groups), options);
  }
  MPIACCEL_THROW("unknown [optimizer] name '" + config.name + "'; accepted: adamw|sgd");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mpiaccel::detail
